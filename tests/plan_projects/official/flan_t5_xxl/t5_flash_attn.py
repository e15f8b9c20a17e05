"""Flash attention for the T5 blocks of a Hugging Face model, swapped in after it is built."""

import torch
from torch import nn
from transformers.models.t5.modeling_t5 import T5Attention


class T5FlashAttention(T5Attention):
    """T5's attention computed by ``scaled_dot_product_attention`` (the flash kernel on A100)."""

    def forward(self, hidden_states, mask=None, key_value_states=None, position_bias=None, **kwargs):
        batch, length = hidden_states.shape[:2]
        source = hidden_states if key_value_states is None else key_value_states

        def heads(states):
            return states.view(batch, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        query, key, value = heads(self.q(hidden_states)), heads(self.k(source)), heads(self.v(source))
        if position_bias is None:
            position_bias = (
                self.compute_bias(length, key.shape[2])
                if self.has_relative_attention_bias
                else torch.zeros(1, self.n_heads, length, key.shape[2], device=query.device)
            )
            if mask is not None:
                position_bias = position_bias + mask
        attended = nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=position_bias.to(query.dtype), scale=1.0
        )
        output = self.o(attended.transpose(1, 2).reshape(batch, length, self.inner_dim))
        return output, None, position_bias


def add_flash_attn(model, model_config):
    for index, block in enumerate(model.encoder.block.children()):
        block.layer[0].SelfAttention = T5FlashAttention(
            model_config, has_relative_attention_bias=index == 0
        )
    for index, block in enumerate(model.decoder.block.children()):
        block.layer[0].SelfAttention = T5FlashAttention(
            model_config, has_relative_attention_bias=index == 0
        )
        block.layer[1].EncDecAttention = T5FlashAttention(model_config)
