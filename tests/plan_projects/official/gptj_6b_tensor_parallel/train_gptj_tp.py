"""GPT-J with tensor parallelism: fine-tune the 6B checkpoint, or train a model of the sizes given."""

import argparse
import logging
import os

import smdistributed.modelparallel.torch as smp
import torch
from data_pipeline import create_pretraining_dataloader
from transformers import AutoModelForCausalLM, GPTJConfig, set_seed

logger = logging.getLogger(__name__)


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train_batch_size", type=int, default=4)
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--activation_checkpointing", type=int, default=1)
    parser.add_argument("--max_context_width", type=int, default=1024)
    parser.add_argument("--vocab_size", type=int, default=50400)
    parser.add_argument("--hidden_width", type=int, default=768)
    parser.add_argument("--num_layers", type=int, default=12)
    parser.add_argument("--num_heads", type=int, default=12)
    parser.add_argument("--resid_pdrop", type=float, default=0.1)
    parser.add_argument("--embd_pdrop", type=float, default=0.1)
    parser.add_argument("--attn_pdrop", type=float, default=0.1)
    parser.add_argument("--use_distributed_transformer", type=int, default=1)
    parser.add_argument("--finetune_6b", type=int, default=0, help="fine-tune EleutherAI/gpt-j-6b")
    parser.add_argument("--fp16", type=int, default=0)
    parser.add_argument("--bf16", type=int, default=0)
    parser.add_argument("--fused_softmax", type=int, default=1)
    parser.add_argument("--training_dir", type=str, default=os.getenv("SM_CHANNEL_TRAIN"))
    return parser.parse_args()


@smp.step
def train_step(model, input_ids):
    loss = model(input_ids=input_ids, labels=input_ids)["loss"]
    model.backward(loss)
    return loss


def main():
    args = parse_args()
    smp.init()
    set_seed(args.seed)

    model_config = GPTJConfig(
        vocab_size=args.vocab_size,
        n_positions=args.max_context_width,
        n_embd=args.hidden_width,
        n_layer=args.num_layers,
        n_head=args.num_heads,
        n_inner=None,
        resid_pdrop=args.resid_pdrop,
        embd_pdrop=args.embd_pdrop,
        attn_pdrop=args.attn_pdrop,
        use_cache=False,
    )

    if args.fp16 and args.bf16:
        raise ValueError("fp16 and bf16 cannot both be on")
    elif args.fp16:
        dtype = torch.float16
    elif args.bf16:
        dtype = torch.bfloat16
    else:
        dtype = torch.get_default_dtype()

    if args.finetune_6b:
        with smp.model_creation(
            tensor_parallelism=smp.tp_size() > 1 or args.use_distributed_transformer > 0,
            dtype=dtype,
            fused_softmax=args.fused_softmax > 0,
        ):
            model = AutoModelForCausalLM.from_pretrained(
                "EleutherAI/gpt-j-6b", revision="float16", torch_dtype=torch.float16
            )
            model_config = model.config
    else:
        with smp.model_creation(
            tensor_parallelism=smp.tp_size() > 1 or args.use_distributed_transformer > 0,
            dtype=dtype,
            fused_softmax=args.fused_softmax > 0,
        ):
            model = AutoModelForCausalLM.from_config(model_config)

    torch.cuda.set_device(smp.local_rank())
    model = smp.DistributedModel(model, trace_device="gpu")
    layers = model.get_module().transformer.seq_layers
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    if args.activation_checkpointing:
        smp.set_activation_checkpointing(layers, strategy="each")
    optimizer = smp.DistributedOptimizer(optimizer)

    paths = sorted(os.path.join(args.training_dir, p) for p in os.listdir(args.training_dir))
    dataloader = create_pretraining_dataloader(
        paths,
        args.train_batch_size,
        args.max_context_width,
        dp_rank=smp.rdp_rank(),
        dp_size=smp.rdp_size(),
        seed=args.seed,
    )
    model.train()
    for step, (input_ids, _) in enumerate(dataloader):
        if step >= args.max_steps:
            break
        optimizer.zero_grad(set_to_none=True)
        loss = train_step(model, input_ids.to(smp.local_rank()))
        optimizer.step()
        if smp.rank() == 0:
            logger.info("step %d loss %.4f", step, loss.reduce_mean().item())


if __name__ == "__main__":
    main()
