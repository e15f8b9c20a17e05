"""A GPT-2 training script in the style of the official example: the model's shape, the batch
and every memory switch come from the command line, which the launcher's hyperparameters set."""
import argparse

import smdistributed.modelparallel.torch as smp
import torch
from transformers import AutoModelForCausalLM, GPT2Config


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train_batch_size", type=int, default=4)
    parser.add_argument("--max_context_width", type=int, default=1024)
    parser.add_argument("--vocab_size", type=int, default=50257)
    parser.add_argument("--hidden_width", type=int, default=768)
    parser.add_argument("--num_layers", type=int, default=12)
    parser.add_argument("--num_heads", type=int, default=12)
    parser.add_argument("--fp16", type=int, default=0)
    parser.add_argument("--bf16", type=int, default=0)
    parser.add_argument("--activation_checkpointing", type=int, default=1)
    parser.add_argument("--activation_strategy", type=str, default="each")
    parser.add_argument("--use_distributed_transformer", type=int, default=1)
    parser.add_argument("--flash_attention", type=int, default=0)
    parser.add_argument("--microbatches", type=int, default=1)
    return parser.parse_args()


def main():
    args = parse_args()
    smp.init({"ddp": True, "microbatches": args.microbatches, "fp16": args.fp16 > 0, "bf16": args.bf16 > 0})
    config = GPT2Config(
        vocab_size=args.vocab_size,
        n_positions=args.max_context_width,
        n_embd=args.hidden_width,
        n_layer=args.num_layers,
        n_head=args.num_heads,
        n_inner=None,
        use_cache=False,
    )
    dtype = torch.float16 if args.fp16 else (torch.bfloat16 if args.bf16 else torch.float32)
    with smp.model_creation(
        tensor_parallelism=smp.tp_size() > 1 or args.use_distributed_transformer > 0,
        dtype=dtype,
        flash_attention=args.flash_attention > 0,
    ):
        model = AutoModelForCausalLM.from_config(config)
    model = smp.DistributedModel(model, trace_device="gpu")
    layers = model.get_module().transformer.seq_layers
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.activation_checkpointing:
        smp.set_activation_checkpointing(layers, strategy=args.activation_strategy)
    optimizer = smp.DistributedOptimizer(optimizer)


if __name__ == "__main__":
    main()
