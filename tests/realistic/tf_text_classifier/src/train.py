"""Fine-tune a transformer review classifier with the TensorFlow flavour of SMP v1.

Launched by ../launch.py: two pipeline stages per model replica, four microbatches, and
Horovod across replicas ("horovod": True, so the library starts Horovod on the
data-parallel group and this script never calls `hvd.init()`).
"""

import argparse
import json
import os
import time

import horovod.tensorflow as hvd
import numpy as np
import smdistributed.modelparallel.tensorflow as smp
import tensorflow as tf

import data
from model import ReviewClassifier

# The same global seed on every rank: ops created without their own seed get the same one.
tf.random.set_seed(20210615)
np.random.seed(20210615)

smp.init()


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--warmup-steps", type=int, default=500)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--output-dir", default=os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"))
    return parser.parse_args()


class WarmupThenDecay(tf.keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then inverse square-root decay."""

    def __init__(self, peak, warmup_steps):
        super().__init__()
        self.peak = peak
        self.warmup_steps = float(warmup_steps)

    def __call__(self, step):
        step = tf.cast(step, tf.float32) + 1.0
        warm = step / self.warmup_steps
        decay = tf.math.rsqrt(step / self.warmup_steps)
        return self.peak * tf.minimum(warm, decay)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}


args = parse_args()

train_ds = data.train_dataset(args.seq_len, args.batch_size)
validation_ds = data.validation_dataset(args.seq_len, args.batch_size)

model = ReviewClassifier(vocab_size=args.vocab_size, seq_len=args.seq_len, depth=args.depth)
# Profile on a few batches so that automatic partitioning sees real activation sizes.
for _ in range(2):
    model.profile(data.profiling_batch(args.seq_len, args.batch_size))

schedule = WarmupThenDecay(args.lr, args.warmup_steps)
optimizer = tf.keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

train_loss = tf.keras.metrics.Mean(name="train_loss")
train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
validation_loss = tf.keras.metrics.Mean(name="validation_loss")
validation_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="validation_accuracy")

checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=tf.Variable(0))
ckpt_manager = smp.CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=2)


@smp.step
def get_grads(ids, labels):
    logits = model(ids, training=True)
    loss = loss_object(labels, logits)
    grads = optimizer.get_gradients(loss, model.trainable_variables)
    return grads, loss, logits


@tf.function
def train_step(ids, labels, first_batch):
    gradients, loss, logits = get_grads(ids, labels)
    # Combine the microbatches, then average across the model replicas.
    gradients = [hvd.allreduce(g.accumulate()) for g in gradients]
    gradients, _ = tf.clip_by_global_norm(gradients, 1.0)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))

    # After the first step has created the variables, start every replica from rank 0's.
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(optimizer.variables(), root_rank=0)

    train_loss(loss.reduce_mean())
    train_accuracy(labels, logits)  # expect: SMP705 error
    return loss.reduce_mean()


@smp.step(
    input_signature=[
        tf.TensorSpec(shape=[None, None], dtype=tf.int32),
        tf.TensorSpec(shape=[None], dtype=tf.int32),
    ]
)
def validation_step(ids, labels):
    logits = model(ids, training=False)
    loss = loss_object(labels, logits)
    validation_loss(loss)
    validation_accuracy(labels, logits)
    return loss


def log(step, epoch, started):
    if smp.rank() != 0:
        return
    elapsed = time.time() - started
    print(
        f"epoch {epoch} step {step}: loss {train_loss.result():.4f} "
        f"accuracy {train_accuracy.result():.4f} ({elapsed:.0f}s)",
        flush=True,
    )


def validate():
    validation_loss.reset_states()
    validation_accuracy.reset_states()
    for ids, labels in validation_ds:
        validation_step(ids, labels)
    return float(validation_loss.result()), float(validation_accuracy.result())


def write_metrics(history):
    if smp.dp_rank() != 0 or smp.mp_rank() != 0:
        return
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "metrics.json"), "w") as handle:
        json.dump(history, handle, indent=2)


history = []
global_step = 0
started = time.time()
for epoch in range(args.epochs):
    train_loss.reset_states()
    train_accuracy.reset_states()
    for batch, (ids, labels) in enumerate(train_ds):
        if epoch == 0 and batch == 1:
            # SMP 1.2 (TensorFlow 2.4.1): restore only once the first step has partitioned the model.
            ckpt_manager.restore()
        train_step(ids, labels, tf.constant(global_step == 0))
        global_step += 1
        if global_step % args.log_every == 0:
            log(global_step, epoch, started)

    checkpoint.epoch.assign(epoch + 1)
    ckpt_manager.save()
    smp.barrier()

    loss, accuracy = validate()
    history.append({"epoch": epoch, "train_loss": float(train_loss.result()), "validation_loss": loss,
                    "validation_accuracy": accuracy})
    if smp.rank() == 0:
        print(f"epoch {epoch}: validation loss {loss:.4f} accuracy {accuracy:.4f}", flush=True)

write_metrics(history)

# Every rank takes part in saving: the library gathers the partitions itself.
model.save_model(args.model_dir)

if smp.local_rank() == 0:
    print(f"saved the model to {args.model_dir}")
