"""Sharded checkpoints: every rank writes its own shard with torch.distributed.checkpoint."""

import os

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import StateDictType


def save(model, optimizer, step, root):
    path = os.path.join(root, f"step_{step:06d}")
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        state = {
            "model": model.state_dict(),
            "optimizer": FSDP.optim_state_dict(model, optimizer),
            "step": step,
        }
        dcp.save(state, checkpoint_id=path)
    if dist.get_rank() == 0:
        print(f"saved step {step} to {path}")


def latest(root):
    if not os.path.isdir(root):
        return None
    steps = sorted(name for name in os.listdir(root) if name.startswith("step_"))
    return os.path.join(root, steps[-1]) if steps else None


def load(model, optimizer, path):
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        state = {"model": model.state_dict(), "optimizer": FSDP.optim_state_dict(model, optimizer), "step": 0}
        dcp.load(state, checkpoint_id=path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(FSDP.optim_state_dict_to_load(model, optimizer, state["optimizer"]))
    return state["step"]
