#!/bin/bash
set -ex
export SM_HP_MP_PARAMETERS='{"partitions": 2, "ddp": true, "fp16": true, "shard_optimizer_state": true}'
mpirun --allow-run-as-root -np 8 python ../other/smp_fp16.py
