"""MNIST with pipeline parallelism in TensorFlow 2.

The pipelines keep their last batch on purpose: Keras' MNIST has 60000 training and 10000 test
images, so in batches of 32 the training data comes out even, the 5000 held-out images too,
and the test set leaves a last batch of 16, which two microbatches split.
"""

import argparse
import os

import tensorflow as tf
from tensorflow.keras.layers import Conv2D, Dense, Flatten, MaxPooling2D

import smdistributed.modelparallel.tensorflow as smp
from metrics import make_metrics, reset, summary

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--model-dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
args, _ = parser.parse_known_args()

smp.init()
tf.random.set_seed(1234)

cache = os.path.join(os.path.expanduser("~"), ".keras", "datasets")
os.makedirs(cache, exist_ok=True)

# Each process downloads into its own file so that processes on one host do not collide.
(x_train, y_train), (x_test, y_test) = tf.keras.datasets.mnist.load_data("MNIST-data-%d" % smp.rank())
x_train, x_test = x_train / 255.0, x_test / 255.0
x_train = x_train[..., tf.newaxis].astype("float32")
x_test = x_test[..., tf.newaxis].astype("float32")

# The last 5000 training images are held out for validation.
x_val, y_val = x_train[-5000:], y_train[-5000:]
x_fit, y_fit = x_train[:-5000], y_train[:-5000]


def augment(image, label):
    image = tf.image.random_crop(tf.pad(image, [[2, 2], [2, 2], [0, 0]]), [28, 28, 1])
    return image, label


train_ds = (
    tf.data.Dataset.from_tensor_slices((x_fit, y_fit))
    .shuffle(10000, seed=123)
    .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    .batch(args.batch_size)
    .prefetch(tf.data.AUTOTUNE)
)
val_ds = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(args.batch_size)
test_ds = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(args.batch_size)


class ConvNet(smp.DistributedModel):
    def __init__(self):
        super().__init__()
        self.conv1 = Conv2D(32, 3, activation="relu")
        self.conv2 = Conv2D(64, 3, activation="relu")
        self.pool = MaxPooling2D()
        self.flatten = Flatten()
        self.hidden = Dense(128, activation="relu")
        self.logits = Dense(10)

    def call(self, x, training=None):
        x = self.pool(self.conv2(self.conv1(x)))
        return self.logits(self.hidden(self.flatten(x)))


model = ConvNet()
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.Adam()
metrics = make_metrics()


@smp.step
def get_grads(images, labels):
    predictions = model(images, training=True)
    loss = loss_object(labels, predictions)
    grads = optimizer.get_gradients(loss, model.trainable_variables)
    return grads, loss, predictions


@tf.function
def train_step(images, labels):
    gradients, loss, predictions = get_grads(images, labels)
    gradients = [g.accumulate() for g in gradients]
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    metrics["train_loss"](loss.reduce_mean())
    metrics["train_accuracy"](labels, predictions.merge())


@smp.step
def eval_step(images, labels):
    predictions = model(images, training=False)
    return loss_object(labels, predictions), predictions


@tf.function
def validation_step(images, labels, prefix):
    loss, predictions = eval_step(images, labels)
    metrics[f"{prefix}_loss"](loss.reduce_mean())
    metrics[f"{prefix}_accuracy"](labels, predictions.merge())


for epoch in range(args.epochs):
    reset(metrics)
    for images, labels in train_ds:
        train_step(images, labels)
    for images, labels in val_ds:
        validation_step(images, labels, "val")
    if smp.rank() == 0:
        print(f"epoch {epoch + 1}: {summary(metrics, 'train')}; {summary(metrics, 'val')}")

for images, labels in test_ds:
    validation_step(images, labels, "test")
if smp.rank() == 0:
    print(summary(metrics, "test"))
    model.save_weights(os.path.join(args.model_dir, "weights"))
