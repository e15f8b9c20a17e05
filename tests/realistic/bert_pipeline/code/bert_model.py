"""A compact BERT for masked-language-model and next-sentence pre-training.

The encoder layers sit in an ``nn.Sequential`` when ``use_sequential`` is set, which lets
the pipeline partitioner place whole layers on each stage.
"""

import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class BertConfig:
    def __init__(self, vocab_size=30528, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                 intermediate_size=4096, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02, use_sequential=False):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.use_sequential = use_sequential

    @classmethod
    def from_json_file(cls, path):
        with open(path) as handle:
            return cls(**json.load(handle))


class Embeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids):
        positions = torch.arange(input_ids.size(1), device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        return self.dropout(self.norm(x))


class Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.heads = config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm1 = nn.LayerNorm(config.hidden_size, eps=1e-12)
        self.ff1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ff2 = nn.Linear(config.intermediate_size, config.hidden_size)
        self.norm2 = nn.LayerNorm(config.hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.attn_dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, inputs):
        x, mask = inputs
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(width // self.heads) + mask
        context = (self.attn_dropout(scores.softmax(-1)) @ v).transpose(1, 2).reshape(batch, length, width)
        x = self.norm1(x + self.dropout(self.proj(context)))
        x = self.norm2(x + self.dropout(self.ff2(F.gelu(self.ff1(x)))))
        return x, mask


class BertForPreTraining(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embeddings = Embeddings(config)
        layers = [Layer(config) for _ in range(config.num_hidden_layers)]
        self.encoder = nn.Sequential(*layers) if config.use_sequential else nn.ModuleList(layers)
        self.use_sequential = config.use_sequential
        self.mlm_transform = nn.Linear(config.hidden_size, config.hidden_size)
        self.mlm_norm = nn.LayerNorm(config.hidden_size, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        self.nsp = nn.Linear(config.hidden_size, 2)
        self.apply(lambda module: self._init(module, config.initializer_range))

    @staticmethod
    def _init(module, std):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def forward(self, input_ids, token_type_ids, attention_mask):
        mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        x = self.embeddings(input_ids, token_type_ids)
        if self.use_sequential:
            x, _ = self.encoder((x, mask))
        else:
            for layer in self.encoder:
                x, _ = layer((x, mask))
        hidden = self.mlm_norm(F.gelu(self.mlm_transform(x)))
        prediction_scores = hidden @ self.embeddings.word.weight.t() + self.mlm_bias
        seq_relationship_score = self.nsp(torch.tanh(self.pooler(x[:, 0])))
        return prediction_scores, seq_relationship_score


class PretrainingCriterion(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.vocab_size = vocab_size
        self.loss = nn.CrossEntropyLoss(ignore_index=-1)

    def forward(self, prediction_scores, seq_relationship_score, masked_lm_labels, next_sentence_labels):
        mlm = self.loss(prediction_scores.view(-1, self.vocab_size), masked_lm_labels.view(-1))
        nsp = self.loss(seq_relationship_score.view(-1, 2), next_sentence_labels.view(-1))
        return mlm + nsp
