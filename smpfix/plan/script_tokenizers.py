"""The longest input of the tokenizers official examples prepare their data with.

A data pipeline often cuts its texts to the tokenizer's limit, the way Hugging Face's
``run_clm.py`` and the SMP v1 notebooks do (``block_size = tokenizer.model_max_length``,
capped at 1024). ``model_max_length`` is the published ``tokenizer_config.json`` value of
each checkpoint on the Hugging Face Hub (the ``max_model_input_sizes`` of the tokenizer
class for the original GPT-2, BERT and T5 checkpoints). A tokenizer whose configuration sets
no limit has ``transformers``' ``VERY_LARGE_INTEGER`` (``int(1e30)``), which a pipeline's own
cap replaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

VERY_LARGE_INTEGER = int(1e30)

_GPT2 = dict.fromkeys(("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "distilgpt2"), 1024)
_T5 = dict.fromkeys(
    (
        "t5-small",
        "t5-base",
        "t5-large",
        "t5-3b",
        "t5-11b",
        *(f"google/flan-t5-{size}" for size in ("small", "base", "large", "xl", "xxl")),
        *(f"google/t5-v1_1-{size}" for size in ("small", "base", "large", "xl", "xxl")),
    ),
    512,
)
_BERT = dict.fromkeys(
    (
        "bert-base-uncased",
        "bert-base-cased",
        "bert-large-uncased",
        "bert-large-cased",
        "bert-large-uncased-whole-word-masking",
        "roberta-base",
        "roberta-large",
    ),
    512,
)
MODEL_MAX_LENGTH: Mapping[str, int] = {
    **_GPT2,
    **_T5,
    **_BERT,
    "eleutherai/gpt-j-6b": 2048,
    "eleutherai/gpt-neox-20b": VERY_LARGE_INTEGER,
    "tiiuae/falcon-7b": 2048,
    "tiiuae/falcon-40b": 2048,
}


def tokenizer_max_length(name: str) -> Optional[int]:
    """``model_max_length`` of the tokenizer ``from_pretrained(name)`` loads; None when smpfix
    does not know it (Hub names are case-insensitive)."""
    return MODEL_MAX_LENGTH.get(name.strip().lower().removeprefix("openai-community/"))
