"""A small transformer encoder for 5-class review ratings, as a `smp.DistributedModel`.

The library partitions the model at the first step by building a second copy of the class,
so every layer is created in `__init__` from plain settings, never passed in.
"""

import smdistributed.modelparallel.tensorflow as smp
import tensorflow as tf
from tensorflow.keras import layers


class PositionalEmbedding(layers.Layer):
    def __init__(self, vocab_size, seq_len, hidden):
        super().__init__()
        self.tokens = layers.Embedding(vocab_size, hidden)
        self.positions = layers.Embedding(seq_len, hidden)

    def call(self, ids):
        positions = tf.range(start=0, limit=tf.shape(ids)[-1], delta=1)
        return self.tokens(ids) + self.positions(positions)


class EncoderBlock(layers.Layer):
    def __init__(self, hidden, heads, ffn, dropout):
        super().__init__()
        self.attention = layers.MultiHeadAttention(num_heads=heads, key_dim=hidden // heads)
        self.ffn_in = layers.Dense(ffn, activation="gelu")
        self.ffn_out = layers.Dense(hidden)
        self.norm1 = layers.LayerNormalization(epsilon=1e-6)
        self.norm2 = layers.LayerNormalization(epsilon=1e-6)
        self.drop1 = layers.Dropout(dropout)
        self.drop2 = layers.Dropout(dropout)

    def call(self, x, mask=None, training=None):
        attended = self.attention(x, x, attention_mask=mask, training=training)
        x = self.norm1(x + self.drop1(attended, training=training))
        hidden = self.ffn_out(self.ffn_in(x))
        return self.norm2(x + self.drop2(hidden, training=training))


class ReviewClassifier(smp.DistributedModel):
    """Embedding, a stack of encoder blocks, mean pooling over the real tokens, a linear head.

    With automatic partitioning the library splits the blocks between the two pipeline stages.
    """

    def __init__(self, vocab_size=32000, seq_len=256, hidden=512, heads=8, ffn=2048, depth=12,
                 classes=5, dropout=0.1):
        super().__init__()
        self.embed = PositionalEmbedding(vocab_size, seq_len, hidden)
        self.blocks = [EncoderBlock(hidden, heads, ffn, dropout) for _ in range(depth)]
        self.pool_norm = layers.LayerNormalization(epsilon=1e-6)
        self.head = layers.Dense(classes)

    def call(self, ids, training=None):
        mask = tf.cast(tf.not_equal(ids, 0), tf.float32)
        attention_mask = mask[:, tf.newaxis, tf.newaxis, :]
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, mask=attention_mask, training=training)
        summed = tf.reduce_sum(x * mask[:, :, tf.newaxis], axis=1)
        pooled = summed / tf.maximum(tf.reduce_sum(mask, axis=1, keepdims=True), 1.0)
        return self.head(self.pool_norm(pooled))
