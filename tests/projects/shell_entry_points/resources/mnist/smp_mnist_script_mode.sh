#!/bin/bash
set -ex

# The container runs this as the entry point: configure the library, then start 8 ranks.
export SM_HP_MP_PARAMETERS='{"partitions": 2, "microbatches": 4, "pipeline": "interleaved", "ddp": true}'
mpirun --allow-run-as-root -np 8 \
    -mca btl_vader_single_copy_mechanism none \
    python smp_pt_mnist.py --data-dir data/training --epochs 1
