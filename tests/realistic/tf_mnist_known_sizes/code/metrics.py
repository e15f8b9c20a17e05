"""Metrics the training script reports."""

import tensorflow as tf


def make_metrics():
    return {
        "train_loss": tf.keras.metrics.Mean(name="train_loss"),
        "train_accuracy": tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy"),
        "val_loss": tf.keras.metrics.Mean(name="val_loss"),
        "val_accuracy": tf.keras.metrics.SparseCategoricalAccuracy(name="val_accuracy"),
        "test_loss": tf.keras.metrics.Mean(name="test_loss"),
        "test_accuracy": tf.keras.metrics.SparseCategoricalAccuracy(name="test_accuracy"),
    }


def reset(metrics):
    for metric in metrics.values():
        metric.reset_states()


def summary(metrics, prefix):
    loss, accuracy = metrics[f"{prefix}_loss"].result(), metrics[f"{prefix}_accuracy"].result()
    return f"{prefix} loss {loss:.4f}, {prefix} accuracy {accuracy * 100:.2f}%"
