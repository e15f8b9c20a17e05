#!/usr/bin/env bash
# Pre-training on one p4d node: tokenise once, then start eight ranks of the trainer.
set -euo pipefail

export NCCL_DEBUG=WARN
export OMP_NUM_THREADS=4

python tools/prepare_data.py --out data/tokens --vocab gpt2

mpirun --allow-run-as-root -np 8 \
    -x NCCL_DEBUG -x OMP_NUM_THREADS \
    python src/pretrain.py --data-dir data/tokens --checkpoint-dir checkpoints "$@"
