"""Model construction for the fine-tuning script: the Hugging Face checkpoint on rank 0, and
the FSDP settings for the model SMP v2's tensor parallelism builds from it."""

import functools

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecision
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.sagemaker.tensor_parallel.transformer import TransformerLayer
from transformers import AutoConfig, AutoModelForCausalLM


def load_base_model(model_name):
    """Rank 0 reads the pretrained weights; the other ranks build an empty model."""
    config = AutoConfig.from_pretrained(model_name)
    config.use_cache = False
    if dist.get_rank() == 0:
        return AutoModelForCausalLM.from_pretrained(model_name, config=config, torch_dtype=torch.float32)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def wrap_policy():
    """FSDP units: SMP v2's transformer layer, which `tsm.transform` puts in place of GPT-NeoX's."""
    return functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={TransformerLayer})


def mixed_precision(bf16):
    dtype = torch.bfloat16 if bf16 else torch.float32
    return MixedPrecision(param_dtype=dtype, reduce_dtype=torch.float32, buffer_dtype=dtype)
