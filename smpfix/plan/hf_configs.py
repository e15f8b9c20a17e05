"""Hugging Face configuration classes: their size keywords and defaults, to a ``ModelShape``.

A script builds ``GPT2Config(n_embd=args.hidden_width, n_layer=args.num_layers, ...)``; the
caller resolves each keyword (argparse defaults, launcher hyperparameters) and passes what it
found, with ``UNKNOWN`` for what it could not. A keyword that decides the size and is unknown
makes the whole shape unknown: no guess. Keywords that do not change the size (dropouts,
activation names, token ids) are ignored. The defaults are those of the ``transformers``
classes (read from their source for GPT-NeoX, Falcon, BLOOM and OPT; BLOOM's code defaults
are tiny, unlike its docstring).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from smpfix.base.literals import UNKNOWN
from smpfix.plan.models import ModelShape


@dataclass(frozen=True)
class Field:
    """One dimension: the keywords that set it (first found wins) and the class default.
    A default of None is derived from other dimensions (``ffn`` = 4 x hidden)."""

    name: str
    keywords: tuple[str, ...]
    default: Any


@dataclass(frozen=True)
class ConfigClass:
    family: str
    fields: tuple[Field, ...]


def _f(name: str, keywords: str, default: Any) -> Field:
    return Field(name, tuple(keywords.split()), default)


_TIED = _f("tied_embeddings", "tie_word_embeddings", True)
_UNTIED = _f("tied_embeddings", "tie_word_embeddings", False)

CONFIG_CLASSES: Mapping[str, ConfigClass] = {
    "GPT2Config": ConfigClass(
        "gpt2",
        (
            _f("hidden", "n_embd hidden_size", 768),
            _f("layers", "n_layer num_hidden_layers", 12),
            _f("heads", "n_head num_attention_heads", 12),
            _f("vocab", "vocab_size", 50257),
            _f("ffn", "n_inner", None),
            _f("max_positions", "n_positions max_position_embeddings", 1024),
            _TIED,
        ),
    ),
    "GPTNeoXConfig": ConfigClass(
        "gpt_neox",
        (
            _f("hidden", "hidden_size", 6144),
            _f("layers", "num_hidden_layers", 44),
            _f("heads", "num_attention_heads", 64),
            _f("vocab", "vocab_size", 50432),
            _f("ffn", "intermediate_size", 24576),
            _f("max_positions", "max_position_embeddings", 2048),
            _UNTIED,
        ),
    ),
    "GPTJConfig": ConfigClass(
        "gptj",
        (
            _f("hidden", "n_embd hidden_size", 4096),
            _f("layers", "n_layer num_hidden_layers", 28),
            _f("heads", "n_head num_attention_heads", 16),
            _f("vocab", "vocab_size", 50400),
            _f("ffn", "n_inner", None),
            _f("max_positions", "n_positions", 2048),
            _UNTIED,
        ),
    ),
    "LlamaConfig": ConfigClass(
        "llama",
        (
            _f("hidden", "hidden_size", 4096),
            _f("layers", "num_hidden_layers", 32),
            _f("heads", "num_attention_heads", 32),
            _f("vocab", "vocab_size", 32000),
            _f("ffn", "intermediate_size", 11008),
            _f("max_positions", "max_position_embeddings", 2048),
            _f("kv_heads", "num_key_value_heads", None),
            _UNTIED,
        ),
    ),
    "MixtralConfig": ConfigClass(
        "mixtral",
        (
            _f("hidden", "hidden_size", 4096),
            _f("layers", "num_hidden_layers", 32),
            _f("heads", "num_attention_heads", 32),
            _f("vocab", "vocab_size", 32000),
            _f("ffn", "intermediate_size", 14336),
            _f("max_positions", "max_position_embeddings", 4096 * 32),
            _f("kv_heads", "num_key_value_heads", 8),
            _f("experts", "num_local_experts", 8),
            _f("experts_per_token", "num_experts_per_tok", 2),
            _UNTIED,
        ),
    ),
    "OPTConfig": ConfigClass(
        "opt",
        (
            _f("hidden", "hidden_size d_model", 768),
            _f("layers", "num_hidden_layers", 12),
            _f("heads", "num_attention_heads", 12),
            _f("vocab", "vocab_size", 50272),
            _f("ffn", "ffn_dim", 3072),
            _f("max_positions", "max_position_embeddings", 2048),
            _f("word_embed_proj_dim", "word_embed_proj_dim", None),
            _f("final_norm", "do_layer_norm_before", True),
            _TIED,
        ),
    ),
    "BloomConfig": ConfigClass(
        "bloom",
        (
            _f("hidden", "hidden_size n_embed", 64),
            _f("layers", "n_layer num_hidden_layers", 2),
            _f("heads", "n_head num_attention_heads", 8),
            _f("vocab", "vocab_size", 250880),
            _f("ffn", "n_inner", None),
            _TIED,
        ),
    ),
    "FalconConfig": ConfigClass(
        "falcon",
        (
            _f("hidden", "hidden_size n_embed", 4544),
            _f("layers", "num_hidden_layers n_layer", 32),
            _f("heads", "num_attention_heads n_head", 71),
            _f("vocab", "vocab_size", 65024),
            _f("ffn", "ffn_hidden_size", None),
            _f("kv_heads", "num_kv_heads n_head_kv", None),
            _f("multi_query", "multi_query", True),
            _f("falcon_new_arch", "new_decoder_architecture", False),
            _TIED,
        ),
    ),
    "T5Config": ConfigClass(
        "t5",
        (
            _f("hidden", "d_model", 512),
            _f("layers", "num_layers", 6),
            _f("decoder_layers", "num_decoder_layers", None),
            _f("heads", "num_heads", 8),
            _f("head_dim", "d_kv", 64),
            _f("vocab", "vocab_size", 32128),
            _f("ffn", "d_ff", 2048),
            _f("feed_forward_proj", "feed_forward_proj", "relu"),
            _TIED,
        ),
    ),
    "BertConfig": ConfigClass(
        "bert",
        (
            _f("hidden", "hidden_size", 768),
            _f("layers", "num_hidden_layers", 12),
            _f("heads", "num_attention_heads", 12),
            _f("vocab", "vocab_size", 30522),
            _f("ffn", "intermediate_size", 3072),
            _f("max_positions", "max_position_embeddings", 512),
            _f("type_vocab", "type_vocab_size", 2),
        ),
    ),
    "RobertaConfig": ConfigClass(
        "roberta",
        (
            _f("hidden", "hidden_size", 768),
            _f("layers", "num_hidden_layers", 12),
            _f("heads", "num_attention_heads", 12),
            _f("vocab", "vocab_size", 30522),
            _f("ffn", "intermediate_size", 3072),
            _f("max_positions", "max_position_embeddings", 512),
            _f("type_vocab", "type_vocab_size", 2),
        ),
    ),
}
_SIZES = ("hidden", "layers", "heads", "vocab")


def size_keywords(class_name: str) -> frozenset[str]:
    """Every keyword of ``class_name`` that changes the model's size."""
    spec = CONFIG_CLASSES.get(class_name)
    return (
        frozenset(k for f in spec.fields for k in f.keywords) if spec is not None else frozenset()
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def shape_from_config(class_name: str, keywords: Mapping[str, Any]) -> Optional[ModelShape]:
    """The shape ``<class_name>(**keywords)`` builds; None when a size keyword is UNKNOWN or
    not a number, or the class is not one smpfix knows."""
    spec = CONFIG_CLASSES.get(class_name)
    if spec is None:
        return None
    values: dict[str, Any] = {}
    for field in spec.fields:
        value = next((keywords[k] for k in field.keywords if k in keywords), field.default)
        if value is UNKNOWN:
            return None
        values[field.name] = value
    if not all(_is_int(values[name]) and values[name] > 0 for name in _SIZES):
        return None
    hidden = values["hidden"]
    ffn = values.get("ffn")
    ffn = 4 * hidden if ffn is None else ffn
    if not _is_int(ffn) or ffn <= 0:
        return None
    tied = values.get("tied_embeddings")
    return ModelShape(
        family=spec.family,
        hidden=hidden,
        layers=values["layers"],
        heads=values["heads"],
        vocab=values["vocab"],
        ffn=ffn,
        max_positions=values["max_positions"] if _is_int(values.get("max_positions")) else 0,
        tied_embeddings=True if tied is None else bool(tied),
        **_family_extras(spec.family, values),
    )


def _positive_or_one(value: Any) -> int:
    return value if _is_int(value) and value > 0 else 1


def _family_extras(family: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The dimensions only some families have, as ``ModelShape`` keywords."""
    kv = values.get("kv_heads")
    if family == "falcon":
        if values.get("falcon_new_arch"):
            return {"kv_heads": kv if _is_int(kv) else values["heads"], "falcon_new_arch": True}
        return {"kv_heads": 1 if values.get("multi_query", True) else (kv if _is_int(kv) else None)}
    if family == "llama":
        return {"gated_ffn": True, **({"kv_heads": kv} if _is_int(kv) else {})}
    if family == "mixtral":
        return {
            "gated_ffn": True,
            **({"kv_heads": kv} if _is_int(kv) else {}),
            "experts": _positive_or_one(values.get("experts")),
            "experts_per_token": _positive_or_one(values.get("experts_per_token")),
        }
    if family == "t5":
        projection = values.get("feed_forward_proj")
        decoder = values.get("decoder_layers")
        return {
            "gated_ffn": isinstance(projection, str) and projection.startswith("gated"),
            "head_dim": values["head_dim"],
            "decoder_layers": decoder if _is_int(decoder) else values["layers"],
        }
    if family == "opt":
        width = values.get("word_embed_proj_dim")
        return {
            "final_norm": bool(values.get("final_norm", True)),
            **({"word_embed_proj_dim": width} if _is_int(width) else {}),
        }
    if family in ("bert", "roberta"):
        return {"type_vocab": values["type_vocab"], "lm_head": False}
    return {}
