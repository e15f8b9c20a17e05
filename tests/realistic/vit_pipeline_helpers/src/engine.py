"""Training and evaluation steps for the pipeline-parallel ViT."""

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn.functional as F


@smp.step
def train_step(model, images, labels):
    logits = model(images)
    loss = F.cross_entropy(logits, labels)
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, images, labels):
    logits = model(images)
    return (logits.argmax(dim=-1) == labels).float().mean()


def train_one_epoch(model, optimizer, loader, device):
    model.train()
    losses = []
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss_mb = train_step(model, images, labels)
        optimizer.step()
        losses.append(loss_mb.reduce_mean().item())
    return sum(losses) / max(len(losses), 1)


def accuracy_of_batch(model, images, labels):
    return eval_step(model, images, labels).reduce_mean().item()


def evaluate(model, loader, device):
    model.eval()
    scores = []
    with torch.no_grad():
        for images, labels in loader:
            scores.append(accuracy_of_batch(model, images.to(device), labels.to(device)))
    return sum(scores) / max(len(scores), 1)
