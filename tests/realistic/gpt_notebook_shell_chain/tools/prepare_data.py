"""Tokenise the raw corpus into fixed-length blocks (runs once, on one process)."""

import argparse
import os

import numpy as np


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--raw", default="data/raw.txt")
    parser.add_argument("--out", required=True)
    parser.add_argument("--vocab", default="gpt2")
    parser.add_argument("--block", type=int, default=1024)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(args.raw, "rb") as handle:
        data = np.frombuffer(handle.read(), dtype=np.uint8).astype(np.int64)
    blocks = len(data) // args.block
    np.save(os.path.join(args.out, "blocks.npy"), data[: blocks * args.block].reshape(blocks, args.block))


if __name__ == "__main__":
    main()
