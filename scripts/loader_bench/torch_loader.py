"""PyTorch's side of scripts/loader_bench.sh: images/s of torchvision's ImageFolder + DataLoader with the ImageNet
training transforms (RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize), batch 32, shuffled,
last partial batch dropped, the default prefetch (2 batches per worker). Timed from the first batch to the last,
as on trainbench's side.

    python torch_loader.py DIR WORKERS [BATCHES]
"""

import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def main() -> None:
    root, workers = sys.argv[1], int(sys.argv[2])
    batches = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    torch.manual_seed(0)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = datasets.ImageFolder(root, tf)
    loader = DataLoader(ds, batch_size=32, shuffle=True, drop_last=True, num_workers=workers)
    it = iter(loader)
    next(it)
    start = time.perf_counter()
    n = 0
    while n < batches:
        try:
            next(it)
        except StopIteration:
            it = iter(loader)
            continue
        n += 1
    secs = time.perf_counter() - start
    print(f"pytorch workers={workers} images_per_s={batches * 32 / secs:.1f}")


if __name__ == "__main__":
    main()
