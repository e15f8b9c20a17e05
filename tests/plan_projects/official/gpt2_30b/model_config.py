"""Model configurations for the pre-training and fine-tuning jobs, built from the command line."""

import logging

from transformers import AutoConfig, BloomConfig, GPT2Config, GPTNeoXConfig, T5Config

logger = logging.getLogger(__name__)


def _gpt2_kwargs(args):
    return {
        "vocab_size": args.vocab_size,
        "n_positions": args.max_context_width,
        "n_embd": args.hidden_width,
        "n_layer": args.num_layers,
        "n_head": args.num_heads,
        "n_inner": None,
        "activation_function": "gelu_new",
        "resid_pdrop": args.resid_pdrop,
        "embd_pdrop": args.embd_pdrop,
        "attn_pdrop": args.attn_pdrop,
        "layer_norm_epsilon": 1e-05,
        "initializer_range": args.initializer_range,
        "use_cache": False,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
        "return_dict": True,
    }


def _gpt_neox_kwargs(args):
    return {
        "vocab_size": args.vocab_size,
        "hidden_size": args.hidden_width,
        "num_hidden_layers": args.num_layers,
        "num_attention_heads": args.num_heads,
        "intermediate_size": 4 * args.hidden_width,
        "hidden_act": "gelu",
        "rotary_pct": args.rotary_pct,
        "max_position_embeddings": args.max_context_width,
        "layer_norm_eps": 1e-05,
        "initializer_range": args.initializer_range,
        "use_cache": False,
    }


def _bloom_kwargs(args):
    return {
        "vocab_size": args.vocab_size,
        "hidden_size": args.hidden_width,
        "n_layer": args.num_layers,
        "n_head": args.num_heads,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "initializer_range": args.initializer_range,
        "use_cache": False,
    }


def _t5_kwargs(args):
    return {
        "vocab_size": args.vocab_size,
        "d_model": args.hidden_width,
        "d_kv": 64,
        "d_ff": args.intermediate_size,
        "num_layers": args.num_layers,
        "num_decoder_layers": args.num_layers,
        "num_heads": args.num_heads,
        "relative_attention_num_buckets": 32,
        "dropout_rate": 0.1,
        "feed_forward_proj": "gated-gelu",
        "is_encoder_decoder": True,
        "use_cache": False,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "decoder_start_token_id": 0,
    }


def get_model_config_from_args(model_type, model_name, args, log=False):
    """The configuration to build: a Hub model's when a name is given, else one from the sizes
    on the command line. Some model types cannot use the distributed transformer; for them the
    flag is switched off here and the caller must use the returned arguments."""
    if model_name:
        logger.info("Loading the configuration of %s", model_name)
        return AutoConfig.from_pretrained(model_name), args

    if model_type == "gpt2":
        config_class = GPT2Config
        config_kwargs = _gpt2_kwargs(args)
    elif model_type == "gpt_neox":
        config_class = GPTNeoXConfig
        config_kwargs = _gpt_neox_kwargs(args)
    elif model_type == "bloom":
        config_class = BloomConfig
        config_kwargs = _bloom_kwargs(args)
        if args.use_distributed_transformer > 0:
            logger.warning("BLOOM has no distributed transformer: using the Hugging Face layers")
            args.use_distributed_transformer = 0
    elif model_type == "flan_t5":
        config_class = T5Config
        config_kwargs = _t5_kwargs(args)
        if args.use_distributed_transformer > 0:
            logger.warning("T5 has no distributed transformer: using the Hugging Face layers")
            args.use_distributed_transformer = 0
    else:
        raise ValueError(f"unknown model type {model_type}")

    if log:
        for key, value in sorted(config_kwargs.items()):
            logger.info("config %-24s %s", key, value)
    return config_class(**config_kwargs), args
