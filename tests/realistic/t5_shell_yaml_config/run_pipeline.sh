#!/bin/bash
# T5 pre-training with pipeline parallelism on one 8-GPU host; the library settings are in the YAML.
set -e
CONFIG=configs/pipeline_4x2.yaml

pip install -q -r requirements.txt
mpirun --allow-run-as-root -np 8 --bind-to none \
    python train_t5.py --config configs/pipeline_4x2.yaml --steps 20000
echo "config was ${CONFIG}"
