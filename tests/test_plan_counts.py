"""Parameter counts: the formulas against published totals, configuration classes against
the checkpoints their defaults describe, and unknown sizes staying unknown."""

from __future__ import annotations

import pytest

from smpfix.base.literals import UNKNOWN
from smpfix.plan.checkpoints import CHECKPOINTS, find_checkpoint
from smpfix.plan.hf_configs import shape_from_config
from smpfix.plan.models import ModelShape, count_parameters


def total(shape: object) -> int:
    assert isinstance(shape, ModelShape), shape
    return count_parameters(shape).total


def checkpoint_total(name: str) -> int:
    found = find_checkpoint(name)
    assert found is not None, name
    return total(found.shape)


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_checkpoint_counts_match_what_is_published(name: str) -> None:
    checkpoint = CHECKPOINTS[name]
    count = total(checkpoint.shape)
    if checkpoint.published is not None:
        assert abs(count - checkpoint.published) / checkpoint.published < 1e-3, (
            count,
            checkpoint.published,
        )
    assert abs(count - checkpoint.nominal) / checkpoint.nominal < 0.06, (count, checkpoint.nominal)


def test_exact_counts_of_the_formula_families() -> None:
    assert checkpoint_total("gpt2") == 124_439_808  # V*h + P*h + L*(12h^2 + 13h) + 2h
    assert checkpoint_total("meta-llama/Llama-2-7b-hf") == 6_738_415_616
    assert checkpoint_total("meta-llama/Llama-2-70b-hf") == 68_976_648_192  # 8 key-value heads
    assert checkpoint_total("t5-small") == 60_506_624
    assert checkpoint_total("bigscience/bloom") == 176_247_271_424
    assert checkpoint_total("bert-base-uncased") == 109_482_240


def test_names_are_found_case_insensitively_and_through_aliases() -> None:
    assert find_checkpoint("meta-llama/Llama-2-7b") == find_checkpoint("meta-llama/Llama-2-7b-hf")
    assert find_checkpoint("meta-llama/Llama-2-13b-chat-hf") == find_checkpoint(
        "meta-llama/Llama-2-13b-hf"
    )
    assert find_checkpoint("EleutherAI/gpt-j-6B") is not None
    assert find_checkpoint("openai-community/gpt2-xl") == find_checkpoint("gpt2-xl")
    assert find_checkpoint("my-org/private-model") is None
    assert find_checkpoint("gpt2-finetuned-on-my-data") is None


def test_the_official_gpt2_example_configuration() -> None:
    # train_gpt_simple.py: GPT2Config(vocab_size=args.vocab_size,
    # n_positions=args.max_context_width,
    # n_embd=args.hidden_width, n_layer=args.num_layers, n_head=args.num_heads, n_inner=None, ...)
    shape = shape_from_config(
        "GPT2Config",
        {
            "vocab_size": 50264,
            "n_positions": 512,
            "n_embd": 7168,
            "n_layer": 48,
            "n_head": 64,
            "n_inner": None,
            "resid_pdrop": 0.1,
        },
    )
    assert shape is not None and shape.ffn == 4 * 7168
    assert 29.5e9 < total(shape) < 30.5e9


def test_configuration_defaults_are_the_default_checkpoints() -> None:
    assert total(shape_from_config("GPT2Config", {})) == 124_439_808
    assert total(shape_from_config("LlamaConfig", {})) == 6_738_415_616
    assert total(shape_from_config("T5Config", {})) == 60_506_624
    assert total(shape_from_config("GPTNeoXConfig", {})) == checkpoint_total(
        "EleutherAI/gpt-neox-20b"
    )
    assert total(shape_from_config("FalconConfig", {})) == checkpoint_total("tiiuae/falcon-7b")
    pooler = 768 * 768 + 768  # BertConfig builds the encoder; the published count has the pooler
    assert (
        total(shape_from_config("BertConfig", {})) == checkpoint_total("bert-base-uncased") - pooler
    )
    flan_base = shape_from_config(
        "T5Config",
        {
            "d_model": 768,
            "d_ff": 2048,
            "num_layers": 12,
            "num_heads": 12,
            "feed_forward_proj": "gated-gelu",
            "tie_word_embeddings": False,
        },
    )
    assert total(flan_base) == 247_577_856


def test_grouped_query_attention_and_falcon_40b_keywords() -> None:
    llama70 = shape_from_config(
        "LlamaConfig",
        {
            "hidden_size": 8192,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "intermediate_size": 28672,
        },
    )
    assert total(llama70) == 68_976_648_192
    falcon40 = shape_from_config(
        "FalconConfig",
        {
            "hidden_size": 8192,
            "num_hidden_layers": 60,
            "num_attention_heads": 128,
            "num_kv_heads": 8,
            "new_decoder_architecture": True,
        },
    )
    assert total(falcon40) == checkpoint_total("tiiuae/falcon-40b")


def test_an_unknown_size_keyword_or_class_gives_no_shape() -> None:
    assert shape_from_config("GPT2Config", {"n_embd": UNKNOWN}) is None
    assert shape_from_config("GPT2Config", {"n_layer": "48"}) is None  # a string is not a size
    assert shape_from_config("MysteryConfig", {}) is None
    assert (
        shape_from_config("GPT2Config", {"resid_pdrop": UNKNOWN}) is not None
    )  # does not change the size


def test_split_of_the_count() -> None:
    count = count_parameters(CHECKPOINTS["gpt2"].shape)
    assert count.layers == 12 and count.in_layers == 12 * (12 * 768 * 768 + 13 * 768)
    assert count.outside_layers == 50257 * 768 + 1024 * 768 + 2 * 768
    assert count.small == 12 * 13 * 768 + 2 * 768
    t5 = count_parameters(CHECKPOINTS["t5-small"].shape)
    assert t5.layers == 12  # encoder and decoder layers
