"""What one transformer layer saves for its backward pass, per kind of layer, with its band.

Korthikanti et al. (2022) count the tensors Megatron's layer keeps: ``s·b·h·(34 + 5·a·s/h)``
bytes in 16 bits with 1-byte dropout masks, which is what SMP v1's distributed transformer
keeps (it is built the same way). A Hugging Face layer is another implementation and keeps
other tensors: GPT-2's and GPT-J's ``gelu_new`` is written out in Python and keeps four
intermediates where a fused GELU keeps one, GPT-J computes attention scores in fp32, Llama's and
T5's RMS norms keep an fp32 copy of their input, T5 keeps an fp32 softmax, GPT-NeoX and Llama
have no dropout masks at all. Each family's count here was made by reading its
``modeling_*.py`` (transformers 4.28, the SMP v1 containers' version) operation by operation
and adding up the tensors autograd saves; ``docs/plan.md`` lists them.

Every count is a sum ``replicated·s·b·h + (split·s·b·h + ffn·s·b·f + scores·a·s²·b) / t`` in
bytes, so it holds at any shape; the "factor relative to Korthikanti" a family comes to
depends on ``f/h`` and ``a·s/h`` and is printed per shape by ``factor``. Each count has a band:

- the low end is the count for a model held in 16 bits (SMP v1's ``fp16``/``bf16``, FSDP's
  ``MixedPrecision``) with ``gelu_new`` fused into one kernel (as later transformers versions
  do it, huggingface/transformers#39073), less 5 %;
- the high end is the count under ``torch.autocast`` with fp32 weights (layer norms and
  softmax then keep fp32 tensors), plus 5 % for the small tensors no count includes (norm
  statistics, rotary tables, the softmax's row sums, allocator rounding).

For Korthikanti's formula the band is -5 %/+10 %: the formula leaves out the same small
tensors, and the library's kernels may keep an fp32 softmax. Families without a count of their
own (OPT, BLOOM, Falcon, a project's own layers) get Korthikanti's formula with the widest
band the counted families span (up to twice the formula).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from smpfix.plan.models import ModelShape


@dataclass(frozen=True)
class LayerTensors:
    """The bytes one layer keeps for backward, as coefficients of the terms above (16 bits)."""

    replicated: float  # × s·b·h on every tensor-parallel rank
    split: float  # × s·b·h, divided by the tensor-parallel degree
    ffn: float  # × s·b·f, divided by the tensor-parallel degree
    scores: float  # × a·s²·b, divided by the tensor-parallel degree; 0 with flash attention

    def bytes(self, shape: ModelShape, seq: int, samples: float, tp: int, flash: bool) -> float:
        s, b, h = seq, samples, shape.hidden
        split = self.split * s * b * h + self.ffn * s * b * shape.ffn
        scores = 0.0 if flash else self.scores * shape.heads * s * s * b
        return self.replicated * s * b * h + (split + scores) / tp

    def scaled(self, by: float) -> LayerTensors:
        return LayerTensors(self.replicated * by, self.split * by, self.ffn * by, self.scores * by)


class LayerKind(str, enum.Enum):
    """Whose layers the model runs: the library's (SMP v1's distributed transformer, SMP v2's
    transformed layers) or the Hugging Face implementation as ``from_pretrained`` builds it."""

    LIBRARY = "library"
    HUGGING_FACE = "hugging face"


@dataclass(frozen=True)
class LayerBand:
    low: LayerTensors
    central: LayerTensors
    high: LayerTensors
    source: str  # where the count comes from, in a few words


def korthikanti(shape: ModelShape) -> LayerTensors:
    """Korthikanti et al., tensor parallelism without sequence parallelism: attention and MLP
    inputs, two dropout masks and two norm inputs on every rank (``10·sbh``); Q, K, V and the
    attention output projection's input split (``8·sbh``); the MLP's activation input and
    output (``4·sbf``, ``8·sbf`` for a gated MLP's three); softmax output, dropout mask and
    dropout output of the scores (``5·as²b``)."""
    return LayerTensors(10, 8, 8 if shape.gated_ffn else 4, 5)


# Hugging Face counts: (model held in 16 bits, under autocast). Layers run without tensor
# parallelism, so every term but the scores is counted as replicated; the scores divide by the
# degree only because a transformed layer splits the heads.
_GPT2 = (LayerTensors(18, 0, 10, 5), LayerTensors(22, 0, 10, 7))
# A fused gelu_new keeps its input only, where the written-out one keeps four tensors: the
# ``ffn`` coefficient of the families that use it drops by 6 (2 bytes x 3 tensors).
_FUSED_GELU_NEW = 6.0
_GELU_NEW = frozenset({"gpt2", "gptj"})
_HUGGING_FACE: Mapping[str, tuple[LayerTensors, LayerTensors]] = {
    # ln_1 in 2, c_attn in 2, q and k 4, v 2, c_proj in 2, resid dropout mask 1, ln_2 in 2,
    # c_fc in 2, MLP dropout mask 1; gelu_new keeps its input, tanh, 0.5·x and 1 + tanh (8·sbf)
    # and c_proj its output (2·sbf); softmax out 2, attention dropout mask 1 and output 2.
    # Under autocast both layer norms keep fp32 inputs (+4) and the softmax fp32 output (+2).
    "gpt2": _GPT2,
    # ln_1 in 2 and out 2 (shared by q, k, v and fc_in), q and k cast to fp32 8, v 2, out_proj
    # in 2, no dropout (pdrop 0.0); gelu_new 8·sbf + fc_out in 2·sbf; fp32 softmax 4 + its
    # 16-bit copy 2. Autocast: the layer norm keeps an fp32 input (+2).
    "gptj": (LayerTensors(16, 0, 10, 6), LayerTensors(18, 0, 10, 6)),
    # Parallel residual: both norms read the same input 2, their outputs 2 + 2, q and k 4, v 2,
    # dense in 2, no dropout (0.0); fused GELU keeps its input and dense_4h_to_h its output
    # (4·sbf); softmax out 2. Autocast: two fp32 norm inputs (+4), fp32 softmax and its copy
    # (+4).
    "gpt_neox": (LayerTensors(14, 0, 4, 2), LayerTensors(18, 0, 4, 6)),
    # Two RMS norms, each an fp32 copy of its input 4 and the normalised 16-bit tensor 2;
    # q/k/v in 2, q and repeated k 4, repeated v 2, o_proj in 2, MLP in 2; SwiGLU keeps the
    # gate's input, silu's output, up's output and their product (8·sbf); fp32 softmax 4 and
    # its 16-bit copy 2; no dropout. The norms and softmax are fp32 anyway: autocast adds none.
    "llama": (LayerTensors(24, 0, 8, 6), LayerTensors(24, 0, 8, 6)),
    # Post-norm, exactly Megatron's layer: Korthikanti's count. Autocast: two fp32 norm inputs
    # (+4) and an fp32 softmax (+2).
    "bert": (LayerTensors(18, 0, 4, 5), LayerTensors(22, 0, 4, 7)),
}
_HUGGING_FACE_ALIASES = {"roberta": "bert", "mistral": "llama"}


def _t5(gated: bool) -> tuple[LayerTensors, LayerTensors]:
    """T5: per encoder and decoder layer averaged (the depth counts both stacks). Each block's
    RMS norm keeps an fp32 copy of its input 4, its input 2 and the normalised tensor 2; an
    attention block: q/k/v in 2, q and k 4, v 2, o in 2, dropout mask 1, and fp32 softmax 4 +
    dropout mask 1 + dropout output 2 (``7·as²b``); the feed-forward block: wi in 2, dropout
    mask 1 and, for ReLU, its output 2 + dropout mask 1 + wo's input 2 (``5·sbf``), for gated
    gelu_new 8 + the product's two inputs 4 + mask 1 + wo's input 2 (``15·sbf``). An encoder
    layer has one attention block, a decoder layer two (the cross-attention over a source
    taken as long as the target): ``(30 + 49) / 2`` sbh and ``(7 + 14) / 2`` as²b. T5's norms
    and softmax are fp32 anyway: autocast adds none."""
    counted = LayerTensors(39.5, 0, 15 if gated else 5, 10.5)
    return counted, counted


def band(shape: ModelShape, kind: LayerKind) -> LayerBand:
    """The low, central and high count of one of ``shape``'s layers run as ``kind``."""
    formula = korthikanti(shape)
    if kind is LayerKind.LIBRARY:
        return LayerBand(
            formula.scaled(0.95), formula, formula.scaled(1.10), "Korthikanti et al. 2022"
        )
    family = _HUGGING_FACE_ALIASES.get(shape.family, shape.family)
    if family == "t5":
        half, autocast = _t5(shape.gated_ffn)
        fused = _fused(half) if shape.gated_ffn else half
    elif family in _HUGGING_FACE:
        half, autocast = _HUGGING_FACE[family]
        fused = _fused(half) if family in _GELU_NEW else half
    else:
        return LayerBand(
            formula.scaled(0.85),
            formula,
            formula.scaled(2.0),
            f"Korthikanti et al. 2022: no count of the Hugging Face {shape.family} layer",
        )
    return LayerBand(
        fused.scaled(0.95),
        half,
        autocast.scaled(1.05),
        f"the tensors the Hugging Face {family} layer saves, counted",
    )


def _fused(counted: LayerTensors) -> LayerTensors:
    return LayerTensors(
        counted.replicated, counted.split, counted.ffn - _FUSED_GELU_NEW, counted.scores
    )


def counted_families() -> tuple[str, ...]:
    """The Hugging Face families with a count of their own (``docs/plan.md`` lists them)."""
    return (*_HUGGING_FACE, "t5")


def factor(shape: ModelShape, seq: int, flash: bool) -> float:
    """The central Hugging Face count over Korthikanti's formula for one layer of ``shape``."""
    hf = band(shape, LayerKind.HUGGING_FACE).central.bytes(shape, seq, 1, 1, flash)
    return hf / korthikanti(shape).bytes(shape, seq, 1, 1, flash)
