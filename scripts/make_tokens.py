#!/usr/bin/env python3
"""Writes a small learnable token dataset for the smoke Llama-shaped decoder of specs/mlperf/ into trainbench's
`npy` layout under datasets/lcg-tokens/. Each sequence follows one rule, next = (5 * id + 3) mod 256 (a
permutation of the 256 ids), from a random first id, so a decoder can bring its evaluation loss (log perplexity)
near zero; nothing is downloaded and nothing is copied from a corpus.

    train/inputs.npy  uint8 [1024, 32]  ids 0..255
    train/labels.npy  uint8 [1024, 32]  the next id of each position
    eval/inputs.npy   uint8 [128, 32]   sequences from other random first ids, never trained on
    eval/labels.npy   uint8 [128, 32]

Usage: python3 scripts/make_tokens.py [out_dir]   (numpy seed 0: the committed files are reproducible)
"""

import sys
from pathlib import Path

import numpy as np

VOCAB, SEQ = 256, 32


def sequences(first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids = np.zeros((len(first), SEQ + 1), dtype=np.int64)
    ids[:, 0] = first
    for t in range(SEQ):
        ids[:, t + 1] = (5 * ids[:, t] + 3) % VOCAB
    return ids[:, :SEQ].astype(np.uint8), ids[:, 1:].astype(np.uint8)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "datasets" / "lcg-tokens"
    rng = np.random.RandomState(0)
    for name, n in [("train", 1024), ("eval", 128)]:
        x, y = sequences(rng.randint(0, VOCAB, size=n))
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "inputs.npy", np.ascontiguousarray(x))
        np.save(folder / "labels.npy", np.ascontiguousarray(y))
        print(f"{folder}: {n} sequences of {SEQ} ids")


if __name__ == "__main__":
    main()
