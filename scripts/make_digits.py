#!/usr/bin/env python3
"""Converts scikit-learn's bundled handwritten digits (1,797 8x8 images, shipped inside the package: nothing is
downloaded) into trainbench's `npy` dataset layout under datasets/digits/:

    train/inputs.npy  float32 [1437, 64]   pixel values scaled to [0, 1] (the originals are 0..16)
    train/labels.npy  int64   [1437]       the digit, 0..9
    test/inputs.npy   float32 [360, 64]    the held-out split (20%), never trained on
    test/labels.npy   int64   [360]

The split is a fixed permutation (numpy seed 0), so the committed files are reproducible. The converted files
are committed; only regenerating them needs scikit-learn (`pip install scikit-learn`).

Usage: python3 scripts/make_digits.py [out_dir]
"""

import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

HELD_OUT = 360


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "datasets" / "digits"
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    assert x.shape == (1797, 64) and y.shape == (1797,), (x.shape, y.shape)
    order = np.random.RandomState(0).permutation(len(y))
    x, y = x[order], y[order]
    splits = {"train": slice(0, len(y) - HELD_OUT), "test": slice(len(y) - HELD_OUT, len(y))}
    for name, part in splits.items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "inputs.npy", np.ascontiguousarray(x[part]))
        np.save(folder / "labels.npy", np.ascontiguousarray(y[part]))
        counts = np.bincount(y[part], minlength=10)
        print(f"{folder}: {len(y[part])} samples, per class {counts.tolist()}")


if __name__ == "__main__":
    main()
