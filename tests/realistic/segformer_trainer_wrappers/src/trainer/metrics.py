"""Segmentation metrics, computed on one process's predictions."""

import torch


def mean_iou(logits, labels, num_classes, ignore_index=255):
    predictions = logits.argmax(dim=1)
    valid = labels != ignore_index
    scores = []
    for cls in range(num_classes):
        predicted = (predictions == cls) & valid
        actual = (labels == cls) & valid
        union = (predicted | actual).sum()
        if union == 0:
            continue
        scores.append((predicted & actual).sum().float() / union.float())
    return torch.stack(scores).mean() if scores else torch.tensor(0.0)
