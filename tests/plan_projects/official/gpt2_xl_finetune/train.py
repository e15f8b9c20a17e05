"""Pre-training and fine-tuning with sharded data parallelism (SMP v1)."""

import argparse
import logging
import os

import model_config as model_config_lib
import smdistributed.modelparallel.torch as smp
import torch
import torch.utils.data
from data_pipeline import create_pretraining_dataloader
from torch import optim
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, set_seed

logger = logging.getLogger(__name__)


def parse_args():
    parser = argparse.ArgumentParser()

    opt = parser.add_argument_group("optimization")
    opt.add_argument("--train_batch_size", type=int, default=4)
    opt.add_argument("--val_batch_size", type=int, default=4)
    opt.add_argument("--max_steps", type=int, default=5000)
    opt.add_argument("--seed", type=int, default=12345)
    opt.add_argument("--same_seed", type=int, default=0)
    opt.add_argument("--lr", type=float, default=1e-4)
    opt.add_argument("--weight_decay", type=float, default=0.01)
    opt.add_argument("--beta1", type=float, default=0.9)
    opt.add_argument("--beta2", type=float, default=0.95)
    opt.add_argument("--use_adamw", type=int, default=1)
    opt.add_argument("--grad_clip", type=float, default=1.0)
    opt.add_argument("--gradient_accumulation", type=int, default=1)
    opt.add_argument("--activation_checkpointing", type=int, default=1)
    opt.add_argument("--checkpoint_sublayers", type=int, default=0)
    opt.add_argument("--activation_strategy", type=str, default="each")
    opt.add_argument("--logging_freq", type=int, default=1)

    io = parser.add_argument_group("io")
    io.add_argument("--training_dir", type=str, default=os.getenv("SM_CHANNEL_TRAIN"))
    io.add_argument("--checkpoint_dir", type=str, default="/opt/ml/checkpoints")
    io.add_argument("--model_dir", type=str, default=os.getenv("SM_MODEL_DIR"))

    model = parser.add_argument_group("model")
    model.add_argument("--model_type", type=str, default="gpt2")
    model.add_argument("--model_name", type=str, default="", help="a Hugging Face Hub model")
    model.add_argument("--fine_tune", type=int, default=0)
    model.add_argument("--max_context_width", type=int, default=1024)
    model.add_argument("--vocab_size", type=int, default=50264)
    model.add_argument("--hidden_width", type=int, default=768)
    model.add_argument("--num_layers", type=int, default=12)
    model.add_argument("--num_heads", type=int, default=12)
    model.add_argument("--intermediate_size", type=int, default=3072)
    model.add_argument("--rotary_pct", type=float, default=0.25)
    model.add_argument("--resid_pdrop", type=float, default=0.1)
    model.add_argument("--embd_pdrop", type=float, default=0.1)
    model.add_argument("--attn_pdrop", type=float, default=0.1)
    model.add_argument("--initializer_range", type=float, default=0.02)

    smp_group = parser.add_argument_group("smp")
    smp_group.add_argument("--fp16", type=int, default=0)
    smp_group.add_argument("--bf16", type=int, default=0)
    smp_group.add_argument("--sharded_data_parallel_degree", type=int, default=1)
    smp_group.add_argument("--delayed_param", type=int, default=0)
    smp_group.add_argument("--use_distributed_transformer", type=int, default=1)
    smp_group.add_argument("--flash_attention", type=int, default=1)
    smp_group.add_argument("--offload_activations", type=int, default=0)
    smp_group.add_argument("--activation_loading_horizon", type=int, default=4)
    smp_group.add_argument("--fused_softmax", type=int, default=1)
    smp_group.add_argument("--fused_bias_gelu", type=int, default=1)
    return parser.parse_args()


def param_groups_by_weight_decay(module):
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        (no_decay if "bias" in name or "norm" in name else decay).append(param)
    return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]


@smp.step
def train_step(model, input_ids, attention_mask):
    loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids)["loss"]
    model.backward(loss)
    return loss


def main():
    args = parse_args()
    smp.init(
        {
            "prescaled_batch": True,
            "sharded_data_parallel_degree": args.sharded_data_parallel_degree,
            "offload_activations": args.offload_activations > 0,
            "activation_loading_horizon": args.activation_loading_horizon,
            "bf16": args.bf16 > 0,
            "fp16": args.fp16 > 0,
        }
    )
    model_config, args = model_config_lib.get_model_config_from_args(
        args.model_type, args.model_name, args, log=smp.rank() == 0
    )
    set_seed(args.seed)

    if args.fp16:
        dtype = torch.float16
    elif args.bf16:
        dtype = torch.bfloat16
    else:
        dtype = torch.get_default_dtype()

    if args.fine_tune > 0 and args.delayed_param > 0 and smp.rank() == 0:
        pretrained = AutoModelForCausalLM.from_pretrained(args.model_name or args.model_dir)
        torch.save(pretrained.state_dict(), os.path.join(args.model_dir, "fullmodel.pt"))
    smp.barrier()

    with smp.model_creation(
        tensor_parallelism=smp.tp_size() > 1 or args.use_distributed_transformer > 0,
        zero_init=args.use_distributed_transformer == 0,
        dtype=dtype,
        distribute_embedding=args.sharded_data_parallel_degree > 1 and smp.tp_size() > 1,
        fused_softmax=args.fused_softmax > 0,
        fused_bias_gelu=args.fused_bias_gelu > 0,
        flash_attention=args.flash_attention > 0,
    ):
        if args.fine_tune > 0 and args.delayed_param == 0:
            model = AutoModelForCausalLM.from_pretrained(args.model_name or args.model_dir)
        elif args.model_type == "flan_t5":
            model = AutoModelForSeq2SeqLM.from_config(model_config)
        else:
            model = AutoModelForCausalLM.from_config(model_config)

    torch.cuda.set_device(smp.local_rank())
    if not args.same_seed:
        set_seed(args.seed + smp.tp_rank())

    model = smp.DistributedModel(model, trace_device="gpu")
    module = model.get_module()
    if args.use_distributed_transformer > 0:
        layers = module.transformer.seq_layers
    elif args.model_type == "gpt_neox":
        layers = module.gpt_neox.layers
    else:
        layers = module.transformer.h

    groups = param_groups_by_weight_decay(module)
    if args.use_adamw > 0:
        optimizer = optim.AdamW(
            groups, betas=(args.beta1, args.beta2), lr=args.lr, weight_decay=args.weight_decay
        )
    else:
        optimizer = optim.Adam(
            groups, betas=(args.beta1, args.beta2), lr=args.lr, weight_decay=args.weight_decay
        )

    if args.activation_checkpointing:
        if args.use_distributed_transformer or smp.tp_size() > 1:
            smp.set_activation_checkpointing(layers, strategy=args.activation_strategy)
        else:
            for child in layers.children():
                smp.set_activation_checkpointing(child)

    optimizer = smp.DistributedOptimizer(
        optimizer, static_loss_scale=None, dynamic_loss_scale=True
    )

    paths = sorted(
        os.path.join(args.training_dir, name)
        for name in os.listdir(args.training_dir)
        if name.endswith(".json")
    )
    dataloader = create_pretraining_dataloader(
        paths,
        args.train_batch_size,
        args.max_context_width,
        dp_rank=smp.dp_rank(),
        dp_size=smp.dp_size(),
        seed=args.seed,
    )

    model.train()
    step = 0
    while step < args.max_steps:
        for input_ids, attention_mask in dataloader:
            optimizer.zero_grad(set_to_none=True)
            loss = train_step(model, input_ids.to(smp.local_rank()), attention_mask.to(smp.local_rank()))
            model.clip_master_grads(args.grad_clip)
            optimizer.step()
            step += 1
            if smp.rank() == 0 and step % args.logging_freq == 0:
                logger.info("step %d loss %.4f", step, loss.reduce_mean().item())
            if step >= args.max_steps:
                break


if __name__ == "__main__":
    main()
