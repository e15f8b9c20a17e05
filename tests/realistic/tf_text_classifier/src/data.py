"""Input pipelines: TFRecord shards of tokenized reviews, one element per review.

Each shard holds `input_ids` (int64, padded to the sequence length) and `label` (0-4 stars).
Every rank of a model replica must read the same batches, so the shuffles are seeded with
the data-parallel rank and the batches keep a size the microbatches divide.
"""

import os

import smdistributed.modelparallel.tensorflow as smp
import tensorflow as tf

FEATURES = {
    "input_ids": tf.io.VarLenFeature(tf.int64),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def _parse(seq_len):
    def parse(record):
        example = tf.io.parse_single_example(record, FEATURES)
        ids = tf.sparse.to_dense(example["input_ids"])[:seq_len]
        ids = tf.pad(ids, [[0, seq_len - tf.shape(ids)[0]]])
        ids.set_shape([seq_len])
        return tf.cast(ids, tf.int32), tf.cast(example["label"], tf.int32)

    return parse


def shard_files(channel):
    """The TFRecord shards of a SageMaker input channel."""
    folder = os.environ.get(f"SM_CHANNEL_{channel.upper()}", f"/opt/ml/input/data/{channel}")
    return tf.io.gfile.glob(os.path.join(folder, "*.tfrecord"))  # expect: SMP707 error


def train_dataset(seq_len, batch_size, shuffle_buffer=20000):
    files = shard_files("train")
    dataset = tf.data.TFRecordDataset(files, num_parallel_reads=4)
    dataset = dataset.map(_parse(seq_len), num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.shuffle(shuffle_buffer, seed=smp.dp_rank(), reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def validation_dataset(seq_len, batch_size):
    files = sorted(shard_files("validation"))
    dataset = tf.data.TFRecordDataset(files)
    dataset = dataset.map(_parse(seq_len), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def profiling_batch(seq_len, batch_size):
    """A few synthetic batches for `model.profile`, the same shape as the training ones."""
    ids = tf.random.uniform([batch_size, seq_len], maxval=1000, dtype=tf.int32, seed=7)
    return ids
