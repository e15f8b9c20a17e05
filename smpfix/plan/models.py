"""Model shapes and their exact parameter counts.

A plan needs more than a total: tensor parallelism splits the parameters inside the
transformer layers and leaves the rest whole (unless embeddings are distributed), and
sharded data parallelism keeps tensors under a million elements (biases, norms) on every
rank. ``count_parameters`` therefore returns the total split that way, computed as the
Hugging Face implementation of each family builds its modules, tied embeddings counted once
(as ``num_parameters()`` does, and unlike the hub's badge, which counts safetensors).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional


@dataclass(frozen=True)
class ModelShape:
    """Architecture dimensions, in Hugging Face configuration terms.

    ``layers`` is the decoder depth (the encoder depth for encoder-only models and for T5,
    whose decoder depth is ``decoder_layers``).
    """

    family: str
    hidden: int
    layers: int
    heads: int
    vocab: int
    ffn: int
    max_positions: int = 0
    kv_heads: Optional[int] = None  # grouped-query or multi-query attention (Llama-2-70b, Falcon)
    head_dim: Optional[int] = None  # T5's d_kv; otherwise hidden // heads
    tied_embeddings: bool = True
    gated_ffn: bool = False  # SwiGLU (Llama) or gated-gelu (T5 v1.1, Flan-T5): three MLP matrices
    decoder_layers: Optional[int] = None
    word_embed_proj_dim: Optional[int] = None  # OPT-350m projects 512 -> 1024
    final_norm: bool = True  # OPT-350m (do_layer_norm_before=False) has no final layer norm
    type_vocab: int = 0  # BERT token types
    pooler: bool = False
    falcon_new_arch: bool = False  # Falcon-40b: two layer norms per layer
    lm_head: bool = True  # the model computes vocabulary logits
    # A mixture of experts (Mixtral): ``experts`` SwiGLU MLPs of width ``ffn`` per layer
    # (``num_local_experts``), of which each token runs ``experts_per_token``
    # (``num_experts_per_tok``); 0 for a dense model.
    experts: int = 0
    experts_per_token: int = 0

    @property
    def kv(self) -> int:
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def dhead(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def depth(self) -> int:
        """Repeated layers, encoder and decoder together."""
        return self.layers + (self.decoder_layers or 0)


@dataclass(frozen=True)
class ParameterCount:
    """A total split the way the parallelism techniques divide it."""

    total: int
    in_layers: int  # inside the repeated transformer layers: tensor parallelism splits these
    # tensors below ~1e6 elements (biases, norms): sharded data parallelism keeps them whole
    small: int
    layers: int  # repeated layers
    # the experts' MLP weights, part of ``in_layers``: expert parallelism splits these
    in_experts: int = 0

    @property
    def outside_layers(self) -> int:
        """Embeddings, an untied output head, final norms, a pooler."""
        return self.total - self.in_layers

    @property
    def per_layer(self) -> float:
        return self.in_layers / self.layers if self.layers else 0.0


def _gpt_like(s: ModelShape) -> ParameterCount:
    """GPT-2, GPT-NeoX, OPT and BLOOM: fused or separate q/k/v/o with biases, a two-matrix
    MLP with biases, two layer norms per layer."""
    h, f, n, v = s.hidden, s.ffn, s.layers, s.vocab
    small = 4 * h + f + h + 4 * h
    per = 4 * h * h + 2 * h * f + small
    final_small = 2 * h if s.final_norm else 0
    outside = v * h
    if s.family == "gpt2":
        outside += s.max_positions * h
    if s.family == "opt":
        width = s.word_embed_proj_dim or h
        outside = v * width + (s.max_positions + 2) * h  # learned positions, offset by 2
        if width != h:
            outside += 2 * width * h  # project_in and project_out, without bias
    if s.family == "bloom":
        final_small += 2 * h  # word_embeddings_layernorm
    if not s.tied_embeddings:
        outside += v * (s.word_embed_proj_dim or h)
    outside += final_small
    return ParameterCount(n * per + outside, n * per, n * small + final_small, n)


def _gptj(s: ModelShape) -> ParameterCount:
    """q, k, v, o without bias; fc_in and fc_out with bias; one layer norm (parallel blocks)."""
    h, f, n, v = s.hidden, s.ffn, s.layers, s.vocab
    small = f + h + 2 * h
    per = 4 * h * h + 2 * h * f + small
    outside = v * h + 2 * h + (0 if s.tied_embeddings else v * h + v)  # lm_head has a bias
    return ParameterCount(n * per + outside, n * per, n * small + 2 * h + v, n)


def _llama(s: ModelShape) -> ParameterCount:
    """Grouped-query attention without biases, a SwiGLU MLP, two RMSNorm weights per layer."""
    h, f, n, v = s.hidden, s.ffn, s.layers, s.vocab
    kv_width = s.kv * s.dhead
    small = 2 * h
    per = 2 * h * h + 2 * h * kv_width + 3 * h * f + small
    outside = v * h + h + (0 if s.tied_embeddings else v * h)
    return ParameterCount(n * per + outside, n * per, n * small + h, n)


def _mixtral(s: ModelShape) -> ParameterCount:
    """Llama's attention and norms; in place of its MLP a router (a linear layer of one output
    per expert, no bias) and ``experts`` SwiGLU MLPs without bias (``MixtralSparseMoeBlock``)."""
    h, f, n, v, e = s.hidden, s.ffn, s.layers, s.vocab, s.experts
    kv_width = s.kv * s.dhead
    small = 2 * h
    experts = e * 3 * h * f
    per = 2 * h * h + 2 * h * kv_width + h * e + experts + small
    outside = v * h + h + (0 if s.tied_embeddings else v * h)
    return ParameterCount(n * per + outside, n * per, n * small + h, n, n * experts)


def _falcon(s: ModelShape) -> ParameterCount:
    """Multi-query (7b) or grouped (40b) attention, linear layers without bias, norms with bias."""
    h, f, n, v = s.hidden, s.ffn, s.layers, s.vocab
    kv_width = s.kv * s.dhead
    small = (2 if s.falcon_new_arch else 1) * 2 * h
    per = h * (h + 2 * kv_width) + h * h + 2 * h * f + small
    outside = v * h + 2 * h + (0 if s.tied_embeddings else v * h)
    return ParameterCount(n * per + outside, n * per, n * small + 2 * h, n)


def _t5(s: ModelShape) -> ParameterCount:
    """Encoder (self-attention, MLP) and decoder (self- and cross-attention, MLP) layers
    without biases, RMS norms, relative position buckets in each stack's first layer."""
    h, f, n, v = s.hidden, s.ffn, s.layers, s.vocab
    inner = s.heads * s.dhead
    matrices = 3 if s.gated_ffn else 2
    encoder = 4 * h * inner + matrices * h * f + 2 * h
    decoder = 8 * h * inner + matrices * h * f + 3 * h
    decoder_layers = s.decoder_layers if s.decoder_layers is not None else n
    relative = 2 * 32 * s.heads  # relative_attention_num_buckets = 32
    outside = v * h + 2 * h + relative + (0 if s.tied_embeddings else v * h)
    in_layers = n * encoder + decoder_layers * decoder
    small = n * 2 * h + decoder_layers * 3 * h + 2 * h + relative
    return ParameterCount(in_layers + outside, in_layers, small, n + decoder_layers)


def _bert(s: ModelShape) -> ParameterCount:
    """BERT and RoBERTa encoders: biases everywhere, post-norm, token types, an optional pooler."""
    h, f, n, v = s.hidden, s.ffn, s.layers, s.vocab
    small = 4 * h + 2 * h + f + h + 2 * h
    per = 4 * h * h + 2 * h * f + small
    outside = (
        v * h + s.max_positions * h + s.type_vocab * h + 2 * h + ((h * h + h) if s.pooler else 0)
    )
    return ParameterCount(n * per + outside, n * per, n * small + 2 * h, n)


_COUNTERS: dict[str, Callable[[ModelShape], ParameterCount]] = {
    "gpt2": _gpt_like,
    "gpt_neox": _gpt_like,
    "opt": _gpt_like,
    "bloom": _gpt_like,
    "gptj": _gptj,
    "llama": _llama,
    "mixtral": _mixtral,
    "falcon": _falcon,
    "t5": _t5,
    "bert": _bert,
    "roberta": _bert,
}


def count_parameters(shape: ModelShape) -> ParameterCount:
    """The exact parameter count of the Hugging Face implementation of ``shape.family``.

    Checked against published totals (gpt2 124M to 1.5B, OPT-125m, BLOOM-560m and 176B,
    Llama-2 7/13/70B, Mixtral 8x7B, T5 and Flan-T5 small to large, BERT and RoBERTa) in the
    tests.
    """
    counter = _COUNTERS.get(shape.family)
    if counter is None:
        raise ValueError(f"unknown model family {shape.family!r}")
    return counter(shape)


def dense_equivalent(shape: ModelShape) -> ModelShape:
    """The dense layer whose activations a mixture-of-experts layer keeps: each token runs
    ``experts_per_token`` experts of width ``ffn``, so the MLP activations are those of one
    MLP that many times as wide; the attention is Llama's. A dense shape is returned as is."""
    if not shape.experts:
        return shape
    return replace(
        shape,
        family="llama",
        ffn=shape.ffn * max(shape.experts_per_token, 1),
        experts=0,
        experts_per_token=0,
    )


def parameters_only(total: int) -> ParameterCount:
    """A count known only as a total (the ``model_parameters`` job setting): every parameter
    is taken as tensor-parallel-distributable and none as small, the optimistic reading,
    since such a plan may only ever say that a job does not fit."""
    return ParameterCount(total, total, 0, 0)
