"""Fine-tunes RoBERTa-large for sequence classification with tensor parallelism.

Only the encoder is marked for tensor parallelism (``smp.set_tensor_parallelism``); the
classification head stays a plain module. The pretrained encoder weights are loaded after
the wrap, translated to the distributed layout. The same script runs without tensor
parallelism (degree 1) for small experiments.
"""

import argparse
import json
import os
import time

import numpy as np
import smdistributed.modelparallel.torch as smp
import torch
import torch.nn.functional as F
from smdistributed.modelparallel.torch.nn.huggingface.roberta import translate_hf_state_dict_to_smdistributed_roberta
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer, get_cosine_schedule_with_warmup


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name", type=str, default="roberta-large")
    parser.add_argument("--num_labels", type=int, default=3)
    parser.add_argument("--max_length", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train_batch_size", type=int, default=16)
    parser.add_argument("--eval_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=1e-5)
    parser.add_argument("--warmup_ratio", type=float, default=0.06)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--label_smoothing", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--log_interval", type=int, default=25)
    parser.add_argument("--train_file", type=str, default=os.path.join(os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"), "train.jsonl"))
    parser.add_argument("--eval_file", type=str, default=os.path.join(os.environ.get("SM_CHANNEL_EVAL", "/opt/ml/input/data/eval"), "dev.jsonl"))
    parser.add_argument("--weights_file", type=str, default="/opt/ml/input/data/weights/pytorch_model.bin")
    parser.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--save_optimizer", type=int, default=0)
    parser.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    parser.add_argument("--gradient_accumulation", type=int, default=1)
    parser.add_argument("--layer_decay", type=float, default=1.0)
    parser.add_argument("--patience", type=int, default=2)
    parser.add_argument("--label_names", type=str, default="entailment,neutral,contradiction")
    return parser.parse_args()


class JsonlPairs(Dataset):
    """Sentence pairs with an integer label, tokenized once up front."""

    def __init__(self, path, tokenizer, max_length):
        with open(path) as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        encoded = tokenizer(
            [row["premise"] for row in rows],
            [row["hypothesis"] for row in rows],
            truncation=True,
            max_length=max_length,
            padding="max_length",
            return_tensors="pt",
        )
        self.input_ids = encoded["input_ids"]
        self.attention_mask = encoded["attention_mask"]
        self.labels = torch.tensor([int(row["label"]) for row in rows], dtype=torch.long)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return self.input_ids[index], self.attention_mask[index], self.labels[index]


def make_loader(dataset, batch_size, shuffle, seed):
    sampler = DistributedSampler(dataset, num_replicas=smp.dp_size(), rank=smp.dp_rank(), shuffle=shuffle, seed=seed)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, num_workers=0)


def decay_groups(module, weight_decay):
    decay, plain = [], []
    for name, param in module.named_parameters():
        (plain if name.endswith("bias") or "LayerNorm" in name else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


def layer_decay_groups(module, base_lr, layer_decay, weight_decay):
    """Layer-wise learning-rate decay: the head trains at ``base_lr``, each encoder layer
    below it at ``layer_decay`` times the one above, the embeddings lowest."""
    layers = module.config.num_hidden_layers
    groups = {}
    for name, param in module.named_parameters():
        if name.startswith("roberta.embeddings"):
            depth = 0
        elif name.startswith("roberta.encoder.layer."):
            depth = int(name.split(".")[3]) + 1
        else:
            depth = layers + 1
        no_decay = name.endswith("bias") or "LayerNorm" in name
        key = (depth, no_decay)
        if key not in groups:
            groups[key] = {
                "params": [],
                "lr": base_lr * layer_decay ** (layers + 1 - depth),
                "weight_decay": 0.0 if no_decay else weight_decay,
            }
        groups[key]["params"].append(param)
    return [groups[key] for key in sorted(groups)]


def parameter_groups(module, args):
    if args.layer_decay < 1.0:
        return layer_decay_groups(module, args.learning_rate, args.layer_decay, args.weight_decay)
    return decay_groups(module, args.weight_decay)


def write_predictions(model, dataset, device, label_names, args):
    """Predictions of the best model for the evaluation file, one label per line (rank 0)."""
    loader = make_loader(dataset, args.eval_batch_size, False, args.seed)
    lines = []
    model.eval()
    with torch.no_grad():
        for input_ids, attention_mask, labels in loader:
            _, predictions_mb = eval_step(model, input_ids.to(device), attention_mask.to(device), labels.to(device))
            lines.extend(label_names[index] for index in predictions_mb.concat().tolist())
    gathered = smp.allgather(lines, smp.DP_GROUP)
    if smp.rank() == 0:
        with open(os.path.join(args.model_dir, "predictions.txt"), "w") as handle:
            for part in gathered:
                handle.write("\n".join(part) + "\n")


@smp.step
def train_step(model, input_ids, attention_mask, labels, label_smoothing):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    loss = F.cross_entropy(logits, labels, label_smoothing=label_smoothing)
    model.backward(loss)
    return loss


@smp.step
def eval_step(model, input_ids, attention_mask, labels):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    return F.cross_entropy(logits, labels, reduction="sum"), logits.argmax(dim=-1)


def evaluate(model, loader, device, num_labels):
    """Loss, accuracy and a confusion matrix over the whole evaluation set (all replicas)."""
    model.eval()
    loss_sum, seen = 0.0, 0
    confusion = np.zeros((num_labels, num_labels), dtype=np.int64)
    with torch.no_grad():
        for input_ids, attention_mask, labels in loader:
            input_ids, attention_mask, labels = input_ids.to(device), attention_mask.to(device), labels.to(device)
            loss_mb, predictions_mb = eval_step(model, input_ids, attention_mask, labels)
            loss_sum += loss_mb.reduce_sum().item()
            predictions = predictions_mb.concat()
            for truth, guess in zip(labels.tolist(), predictions.tolist()):
                confusion[truth, guess] += 1
            seen += labels.size(0)
    model.train()
    gathered = smp.allgather((loss_sum, seen, confusion), smp.DP_GROUP)
    loss_sum = sum(item[0] for item in gathered)
    seen = sum(item[1] for item in gathered)
    confusion = sum(item[2] for item in gathered)
    accuracy = float(np.trace(confusion)) / max(seen, 1)
    return loss_sum / max(seen, 1), accuracy, confusion


def print_report(confusion, label_names):
    """Per-label precision and recall, from the rows (truth) and columns (prediction)."""
    width = max(len(name) for name in label_names)
    print(f"{'label':<{width}}  precision  recall  support")
    for index, name in enumerate(label_names):
        predicted = confusion[:, index].sum()
        actual = confusion[index, :].sum()
        precision = confusion[index, index] / predicted if predicted else 0.0
        recall = confusion[index, index] / actual if actual else 0.0
        print(f"{name:<{width}}  {precision:9.3f}  {recall:6.3f}  {actual:7d}")


def save_epoch_checkpoint(model, optimizer, scheduler, epoch, best_accuracy, args):
    """Resumable partial checkpoint; every rank takes part (it is a collective)."""
    smp.save_checkpoint(
        args.checkpoint_dir,
        tag=f"epoch_{epoch}",
        partial=True,
        model=model,
        optimizer=optimizer,
        user_content={"epoch": epoch, "best_accuracy": best_accuracy, "scheduler": scheduler.state_dict()},
        num_kept_partial_checkpoints=2,
    )


def resume(scheduler, args):
    """(first epoch to run, best accuracy so far) from the newest partial checkpoint, if any."""
    if not os.path.exists(os.path.join(args.checkpoint_dir, "newest")):
        return 0, 0.0
    user_content = smp.resume_from_checkpoint(args.checkpoint_dir, tag=None, partial=True)
    scheduler.load_state_dict(user_content["scheduler"])
    return user_content["epoch"] + 1, user_content["best_accuracy"]


def load_pretrained_encoder(model, args):
    """The pretrained weights, after the wrap: translated to the distributed encoder when
    tensor parallelism is on, as they are otherwise."""
    state = torch.load(args.weights_file, map_location="cpu")
    state = {key: value for key, value in state.items() if not key.startswith("classifier.")}
    if smp.tp_size() > 1:
        state = translate_hf_state_dict_to_smdistributed_roberta(state)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if smp.rank() == 0:
        print(f"loaded encoder weights: {len(missing)} missing (the head), {len(unexpected)} unexpected")


def export_model(model, tokenizer, config, args):
    """The whole model for serving. ``state_dict()`` gathers across tensor- and pipeline-
    parallel peers: all ranks of the first replica group call it."""
    if smp.tp_size() > 1:
        if smp.rdp_rank() == 0:
            state = model.state_dict()
            if smp.rank() == 0:
                torch.save(state, os.path.join(args.model_dir, "model_tp.pt"))
    elif smp.dp_rank() == 0:
        # Without tensor parallelism the data-parallel rank 0 holds every partition's peer.
        state = model.state_dict()
        if smp.rank() == 0:
            torch.save(state, os.path.join(args.model_dir, "model.pt"))
    if smp.rank() == 0:
        tokenizer.save_pretrained(args.model_dir)
        config.save_pretrained(args.model_dir)
    smp.barrier()


def export_optimizer(optimizer, args):
    if args.save_optimizer and smp.rdp_rank() == 0:
        torch.save(optimizer.state_dict(), os.path.join(args.model_dir, "optimizer.pt"))  # expect: SMP303 error


def main():
    args = parse_args()
    smp.init()
    torch.cuda.set_device(smp.local_rank())
    device = torch.device("cuda")
    torch.manual_seed(args.seed + smp.dp_rank())
    np.random.seed(args.seed)

    tokenizer = AutoTokenizer.from_pretrained(args.model_name)
    config = AutoConfig.from_pretrained(args.model_name, num_labels=args.num_labels)
    train_data = JsonlPairs(args.train_file, tokenizer, args.max_length)
    eval_data = JsonlPairs(args.eval_file, tokenizer, args.max_length)
    train_loader = make_loader(train_data, args.train_batch_size, True, args.seed)
    eval_loader = make_loader(eval_data, args.eval_batch_size, False, args.seed)

    model = AutoModelForSequenceClassification.from_config(config)
    smp.set_tensor_parallelism(model.roberta.encoder, True)
    optimizer = torch.optim.AdamW(parameter_groups(model, args), lr=args.learning_rate)  # expect: SMP101 error
    model = smp.DistributedModel(model, backward_passes_per_step=args.gradient_accumulation)
    optimizer = smp.DistributedOptimizer(optimizer)
    load_pretrained_encoder(model, args)

    label_names = args.label_names.split(",")
    updates_per_epoch = len(train_loader) // args.gradient_accumulation
    total_steps = args.epochs * updates_per_epoch
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(args.warmup_ratio * total_steps), total_steps)
    first_epoch, best_accuracy = resume(scheduler, args)
    stale_epochs = 0
    step = first_epoch * updates_per_epoch
    for epoch in range(first_epoch, args.epochs):
        train_loader.sampler.set_epoch(epoch)
        started = time.time()
        for index, (input_ids, attention_mask, labels) in enumerate(train_loader):
            input_ids, attention_mask, labels = input_ids.to(device), attention_mask.to(device), labels.to(device)
            if index % args.gradient_accumulation == 0:
                optimizer.zero_grad()
            loss = train_step(model, input_ids, attention_mask, labels, args.label_smoothing).reduce_mean()
            if (index + 1) % args.gradient_accumulation != 0:
                continue
            optimizer.step()
            scheduler.step()
            step += 1
            if smp.rank() == 0 and step % args.log_interval == 0:
                print(f"epoch {epoch} step {step}/{total_steps} loss {loss.item():.4f}", flush=True)
        eval_loss, accuracy, confusion = evaluate(model, eval_loader, device, args.num_labels)
        if smp.rank() == 0:
            print(f"epoch {epoch}: eval loss {eval_loss:.4f}, accuracy {accuracy:.4f}, {time.time() - started:.0f}s", flush=True)
            print_report(confusion, label_names)
        if accuracy > best_accuracy:
            best_accuracy, stale_epochs = accuracy, 0
            export_model(model, tokenizer, config, args)
        else:
            stale_epochs += 1
        save_epoch_checkpoint(model, optimizer, scheduler, epoch, best_accuracy, args)
        if stale_epochs >= args.patience:
            if smp.rank() == 0:
                print(f"no improvement for {stale_epochs} epochs; stopping", flush=True)
            break
    export_optimizer(optimizer, args)
    write_predictions(model, eval_data, device, label_names, args)
    if smp.rank() == 0:
        with open(os.path.join(args.model_dir, "metrics.json"), "w") as handle:
            json.dump({"best_accuracy": best_accuracy, "steps": step}, handle)


if __name__ == "__main__":
    main()
