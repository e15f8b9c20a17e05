"""Train an image classifier with the TensorFlow flavour of SageMaker model parallelism (SMP v1).

The model is split into two pipeline stages; Horovod averages the gradients of the model
replicas ("horovod": True in the launcher). This is the correct twin of
../pitfalls/train_resnet.py: smpfix finds nothing to report here.
"""

import argparse
import glob
import os

import horovod.tensorflow as hvd
import smdistributed.modelparallel.tensorflow as smp
import tensorflow as tf
from tensorflow.keras import layers

tf.random.set_seed(1234)
smp.init()


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-data", default=os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    parser.add_argument("--test-data", default=os.environ.get("SM_CHANNEL_TEST", "/opt/ml/input/data/test"))
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--classes", type=int, default=100)
    return parser.parse_args()


FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def parse_example(record):
    example = tf.io.parse_single_example(record, FEATURES)
    image = tf.io.decode_jpeg(example["image"], channels=3)
    image = tf.image.resize(image, [224, 224]) / 255.0
    return image, example["label"]


def make_dataset(folder, batch_size):
    # Every rank must read the files in the same order: sort the listing.
    files = sorted(glob.glob(os.path.join(folder, "*.tfrecord")))
    dataset = tf.data.TFRecordDataset(files).map(parse_example, num_parallel_calls=tf.data.AUTOTUNE)
    # The pipeline stages of one replica read the same batches: seed with dp_rank.
    dataset = dataset.shuffle(10000, seed=smp.dp_rank())
    return dataset.batch(batch_size, drop_remainder=True).prefetch(2)


class ResidualBlock(layers.Layer):
    def __init__(self, filters):
        super().__init__()
        self.conv1 = layers.Conv2D(filters, 3, padding="same", activation="relu")
        self.conv2 = layers.Conv2D(filters, 3, padding="same")
        self.norm = layers.BatchNormalization()

    def call(self, x, training=None):
        y = self.conv2(self.conv1(x))
        return tf.nn.relu(x + self.norm(y, training=training))


class Classifier(smp.DistributedModel):
    def __init__(self, classes):
        super().__init__()
        self.stem = layers.Conv2D(64, 7, strides=2, padding="same", activation="relu")
        self.blocks = [ResidualBlock(64) for _ in range(8)]
        self.pool = layers.GlobalAveragePooling2D()
        self.head = layers.Dense(classes)

    def call(self, x, training=None):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x, training=training)
        return self.head(self.pool(x))


args = parse_args()
train_ds = make_dataset(args.train_data, args.batch_size)
test_ds = make_dataset(args.test_data, args.batch_size)

model = Classifier(args.classes)
optimizer = tf.keras.optimizers.Adam(args.lr)
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_loss = tf.keras.metrics.Mean(name="train_loss")
train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="test_accuracy")

checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
ckpt_manager = smp.CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=3)


@smp.step
def get_grads(images, labels):
    logits = model(images, training=True)
    loss = loss_object(labels, logits)
    grads = optimizer.get_gradients(loss, model.trainable_variables)
    return grads, loss, logits


@tf.function
def train_step(images, labels, first_batch):
    gradients, loss, logits = get_grads(images, labels)
    gradients = [hvd.allreduce(g.accumulate()) for g in gradients]
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(optimizer.variables(), root_rank=0)
    train_loss(loss.reduce_mean())
    train_accuracy(labels, logits.merge())
    return loss.reduce_mean()


@smp.step(input_signature=[tf.TensorSpec(shape=[None, 224, 224, 3], dtype=tf.float32),
                           tf.TensorSpec(shape=[None], dtype=tf.int64)])
def test_step(images, labels):
    logits = model(images, training=False)
    test_accuracy(labels, logits)
    return logits


for epoch in range(args.epochs):
    train_loss.reset_states()
    train_accuracy.reset_states()
    test_accuracy.reset_states()
    for batch, (images, labels) in enumerate(train_ds):
        if epoch == 0 and batch == 1:
            # SMP 1.2 (TensorFlow 2.4.1): restore only after the first step has partitioned the model.
            ckpt_manager.restore()
        train_step(images, labels, tf.constant(batch == 0))
    for images, labels in test_ds:
        test_step(images, labels)
    ckpt_manager.save()
    if smp.rank() == 0:
        print(f"epoch {epoch}: loss {train_loss.result():.4f} accuracy {train_accuracy.result():.4f} "
              f"test accuracy {test_accuracy.result():.4f}")

smp.barrier()
model.save_model("/opt/ml/model")
