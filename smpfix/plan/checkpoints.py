"""Well-known ``from_pretrained`` checkpoints and their published ``config.json`` dimensions.

``AutoModelForCausalLM.from_pretrained("EleutherAI/gpt-neox-20b")`` names a model whose
shape is public. Each entry keeps the exact published parameter count where one is published
(model card, paper, ``num_parameters()``) so the tests can hold the formulas to it, and the
nominal size the name announces. A name that is not here stays unknown: a private or
fine-tuned checkpoint may have any shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from smpfix.plan.models import ModelShape


@dataclass(frozen=True)
class Checkpoint:
    shape: ModelShape
    published: Optional[int]  # the exact published count, when there is one
    nominal: float  # the size the name announces


def _gpt2(h: int, n: int, a: int) -> ModelShape:
    return ModelShape("gpt2", h, n, a, 50257, 4 * h, 1024)


def _opt(
    h: int, n: int, a: int, projection: Optional[int] = None, final_norm: bool = True
) -> ModelShape:
    return ModelShape(
        "opt", h, n, a, 50272, 4 * h, 2048, word_embed_proj_dim=projection, final_norm=final_norm
    )


def _bloom(h: int, n: int, a: int) -> ModelShape:
    return ModelShape("bloom", h, n, a, 250880, 4 * h, 2048)


def _llama(
    h: int,
    n: int,
    a: int,
    f: int,
    kv: Optional[int] = None,
    vocab: int = 32000,
    positions: int = 4096,
) -> ModelShape:
    """Llama 2 and 3 and Mistral: the same Hugging Face layers (``MistralForCausalLM`` differs
    only in its sliding-window attention mask)."""
    return ModelShape(
        "llama", h, n, a, vocab, f, positions, kv_heads=kv, tied_embeddings=False, gated_ffn=True
    )


def _mixtral(h: int, n: int, a: int, f: int) -> ModelShape:
    """Mixtral: eight SwiGLU experts per layer, two run per token, grouped-query attention of
    eight key-value heads (the published ``config.json`` files)."""
    return ModelShape(
        "mixtral",
        h,
        n,
        a,
        32000,
        f,
        65536 if n > 32 else 32768,
        kv_heads=8,
        tied_embeddings=False,
        gated_ffn=True,
        experts=8,
        experts_per_token=2,
    )


def _t5(h: int, f: int, n: int, a: int, d_kv: int, gated: bool) -> ModelShape:
    # T5 v1.1 and Flan-T5 (gated-gelu) untie the output head; the original T5 ties it.
    return ModelShape(
        "t5",
        h,
        n,
        a,
        32128,
        f,
        512,
        head_dim=d_kv,
        gated_ffn=gated,
        tied_embeddings=not gated,
        decoder_layers=n,
    )


def _bert(h: int, n: int, a: int, roberta: bool = False) -> ModelShape:
    if roberta:
        return ModelShape(
            "roberta", h, n, a, 50265, 4 * h, 514, type_vocab=1, pooler=True, lm_head=False
        )
    return ModelShape("bert", h, n, a, 30522, 4 * h, 512, type_vocab=2, pooler=True, lm_head=False)


CHECKPOINTS: Mapping[str, Checkpoint] = {
    "gpt2": Checkpoint(_gpt2(768, 12, 12), 124_439_808, 124e6),
    "gpt2-medium": Checkpoint(_gpt2(1024, 24, 16), 354_823_168, 355e6),
    "gpt2-large": Checkpoint(_gpt2(1280, 36, 20), 774_030_080, 774e6),
    "gpt2-xl": Checkpoint(_gpt2(1600, 48, 25), 1_557_611_200, 1.5e9),
    "EleutherAI/gpt-j-6b": Checkpoint(
        ModelShape("gptj", 4096, 28, 16, 50400, 16384, 2048, tied_embeddings=False),
        6_053_381_344,
        6e9,
    ),
    "EleutherAI/gpt-neox-20b": Checkpoint(
        ModelShape("gpt_neox", 6144, 44, 64, 50432, 24576, 2048, tied_embeddings=False),
        20_556_201_984,
        20e9,
    ),
    "facebook/opt-125m": Checkpoint(_opt(768, 12, 12), 125_239_296, 125e6),
    "facebook/opt-350m": Checkpoint(
        _opt(1024, 24, 16, projection=512, final_norm=False), None, 350e6
    ),
    "facebook/opt-1.3b": Checkpoint(_opt(2048, 24, 32), None, 1.3e9),
    "facebook/opt-2.7b": Checkpoint(_opt(2560, 32, 32), None, 2.7e9),
    "facebook/opt-6.7b": Checkpoint(_opt(4096, 32, 32), None, 6.7e9),
    "facebook/opt-13b": Checkpoint(_opt(5120, 40, 40), None, 13e9),
    "facebook/opt-30b": Checkpoint(_opt(7168, 48, 56), None, 30e9),
    "facebook/opt-66b": Checkpoint(_opt(9216, 64, 72), None, 66e9),
    "bigscience/bloom-560m": Checkpoint(_bloom(1024, 24, 16), 559_214_592, 560e6),
    "bigscience/bloom-1b1": Checkpoint(_bloom(1536, 24, 16), None, 1.1e9),
    "bigscience/bloom-1b7": Checkpoint(_bloom(2048, 24, 16), None, 1.7e9),
    "bigscience/bloom-3b": Checkpoint(_bloom(2560, 30, 32), None, 3e9),
    "bigscience/bloom-7b1": Checkpoint(_bloom(4096, 30, 32), 7_069_016_064, 7.1e9),
    "bigscience/bloom": Checkpoint(_bloom(14336, 70, 112), 176_247_271_424, 176e9),
    "meta-llama/Llama-2-7b-hf": Checkpoint(_llama(4096, 32, 32, 11008), 6_738_415_616, 7e9),
    "meta-llama/Llama-2-13b-hf": Checkpoint(_llama(5120, 40, 40, 13824), 13_015_864_320, 13e9),
    "meta-llama/Llama-2-70b-hf": Checkpoint(
        _llama(8192, 80, 64, 28672, kv=8), 68_976_648_192, 70e9
    ),
    "meta-llama/Meta-Llama-3-8B": Checkpoint(
        _llama(4096, 32, 32, 14336, kv=8, vocab=128256, positions=8192), 8_030_261_248, 8e9
    ),
    "meta-llama/Meta-Llama-3-70B": Checkpoint(
        _llama(8192, 80, 64, 28672, kv=8, vocab=128256, positions=8192), 70_553_706_496, 70e9
    ),
    "mistralai/Mistral-7B-v0.1": Checkpoint(
        _llama(4096, 32, 32, 14336, kv=8, positions=32768), 7_241_732_096, 7e9
    ),
    "mistralai/Mixtral-8x7B-v0.1": Checkpoint(
        _mixtral(4096, 32, 32, 14336), 46_702_792_704, 46.7e9
    ),
    "mistralai/Mixtral-8x22B-v0.1": Checkpoint(_mixtral(6144, 56, 48, 16384), None, 141e9),
    "tiiuae/falcon-7b": Checkpoint(
        ModelShape("falcon", 4544, 32, 71, 65024, 4 * 4544, 2048, kv_heads=1),
        6_921_720_704,
        7e9,
    ),
    "tiiuae/falcon-40b": Checkpoint(
        ModelShape(
            "falcon", 8192, 60, 128, 65024, 4 * 8192, 2048, kv_heads=8, falcon_new_arch=True
        ),
        None,
        40e9,
    ),
    "t5-small": Checkpoint(_t5(512, 2048, 6, 8, 64, False), 60_506_624, 60e6),
    "t5-base": Checkpoint(_t5(768, 3072, 12, 12, 64, False), 222_903_552, 220e6),
    "t5-large": Checkpoint(_t5(1024, 4096, 24, 16, 64, False), 737_668_096, 770e6),
    "t5-3b": Checkpoint(_t5(1024, 16384, 24, 32, 128, False), 2_851_598_336, 3e9),
    "t5-11b": Checkpoint(_t5(1024, 65536, 24, 128, 128, False), 11_307_321_344, 11e9),
    "google/flan-t5-small": Checkpoint(_t5(512, 1024, 8, 6, 64, True), 76_961_152, 77e6),
    "google/flan-t5-base": Checkpoint(_t5(768, 2048, 12, 12, 64, True), 247_577_856, 250e6),
    "google/flan-t5-large": Checkpoint(_t5(1024, 2816, 24, 16, 64, True), 783_150_080, 780e6),
    "google/flan-t5-xl": Checkpoint(_t5(2048, 5120, 24, 32, 64, True), 2_849_757_184, 3e9),
    "google/flan-t5-xxl": Checkpoint(_t5(4096, 10240, 24, 64, 64, True), 11_135_332_352, 11e9),
    "bert-base-uncased": Checkpoint(_bert(768, 12, 12), 109_482_240, 110e6),
    "bert-large-uncased": Checkpoint(_bert(1024, 24, 16), 335_141_888, 340e6),
    "roberta-base": Checkpoint(_bert(768, 12, 12, roberta=True), 124_645_632, 125e6),
    "roberta-large": Checkpoint(_bert(1024, 24, 16, roberta=True), 355_359_744, 355e6),
}

# Other names of the same weights: hub organisations added later, cased variants, chat models.
_ALIASES: Mapping[str, str] = {
    "gpt2-small": "gpt2",
    "openai-community/gpt2": "gpt2",
    "openai-community/gpt2-medium": "gpt2-medium",
    "openai-community/gpt2-large": "gpt2-large",
    "openai-community/gpt2-xl": "gpt2-xl",
    "bert-base-cased": "bert-base-uncased",
    "bert-large-cased": "bert-large-uncased",
    "google-bert/bert-base-uncased": "bert-base-uncased",
    "google-bert/bert-large-uncased": "bert-large-uncased",
    "google-bert/bert-base-cased": "bert-base-uncased",
    "google-bert/bert-large-cased": "bert-large-uncased",
    "google-t5/t5-small": "t5-small",
    "google-t5/t5-base": "t5-base",
    "google-t5/t5-large": "t5-large",
    "google-t5/t5-3b": "t5-3b",
    "google-t5/t5-11b": "t5-11b",
    "FacebookAI/roberta-base": "roberta-base",
    "FacebookAI/roberta-large": "roberta-large",
    "meta-llama/Llama-3-8B": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Llama-3-70B": "meta-llama/Meta-Llama-3-70B",
    "meta-llama/Meta-Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Meta-Llama-3-70B-Instruct": "meta-llama/Meta-Llama-3-70B",
    "mistralai/Mistral-7B-Instruct-v0.1": "mistralai/Mistral-7B-v0.1",
    "mistralai/Mistral-7B-Instruct-v0.2": "mistralai/Mistral-7B-v0.1",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai/Mixtral-8x7B-v0.1",
}
_LOWERED = {name.lower(): name for name in (*CHECKPOINTS, *_ALIASES)}


def find_checkpoint(name: str) -> Optional[Checkpoint]:
    """The checkpoint ``name`` loads (case-insensitive; ``-hf`` and ``-chat`` variants of
    Llama 2 share the base dimensions); None for any other name."""
    lowered = name.strip().rstrip("/").lower()
    for candidate in (
        lowered,
        lowered.replace("-chat-hf", "-hf"),
        lowered.replace("-chat", "") + "-hf",
        lowered + "-hf",
    ):
        key = _LOWERED.get(candidate)
        if key is not None:
            return CHECKPOINTS[_ALIASES.get(key, key)]
    return None
