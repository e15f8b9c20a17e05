"""A small BERT encoder: activation checkpointing is a configuration switch, off by default."""

import math

import torch
from torch.utils import checkpoint


class EncoderConfig:
    def __init__(self, hidden_size=768, num_layers=12, checkpoint_activations=False):
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.checkpoint_activations = checkpoint_activations


class Encoder(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            [torch.nn.Linear(config.hidden_size, config.hidden_size) for _ in range(config.num_layers)]
        )
        self._checkpoint_activations = config.checkpoint_activations

    def checkpointed_forward(self, hidden_states):
        def run(start, end):
            def forward(x):
                for layer in self.layers[start:end]:
                    x = layer(x)
                return x

            return forward

        chunk = math.ceil(math.sqrt(len(self.layers)))
        for start in range(0, len(self.layers), chunk):
            hidden_states = checkpoint.checkpoint(run(start, start + chunk), hidden_states)  # expect: SMP408 hint
        return hidden_states

    def forward(self, hidden_states):
        if self._checkpoint_activations:
            return self.checkpointed_forward(hidden_states)
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return hidden_states
