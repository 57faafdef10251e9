"""What memory taken afresh from the operating system costs, measured with PyTorch beside trainbench's own
`calibrate` (`calibration.fresh_memory`): per size, zeroing a kept fp32 tensor in place against allocating a
fresh zeroed one (allocated, written, freed on every call), one intra-op thread, process CPU time, the median of 7
samples of 3 calls after one untimed call. Above the allocator's mmap threshold (glibc: at most 32 MiB) the fresh
tensor pays its pages' faults and zeroing on every call.
Usage: .venv/bin/python scripts/fresh_memory_bench.py [MiB ...]   (default: 8 16 24 31 33 48 64 128)"""
import sys
import time

import torch


def median_seconds(call, samples=7, calls=3):
    call()
    xs = []
    for _ in range(samples):
        start = time.process_time()
        for _ in range(calls):
            call()
        xs.append((time.process_time() - start) / calls)
    xs.sort()
    return xs[len(xs) // 2]


def main():
    torch.set_num_threads(1)
    sizes = [int(a) for a in sys.argv[1:]] or [8, 16, 24, 31, 33, 48, 64, 128]
    print("| size | kept, zeroed in place | fresh | extra per byte |")
    print("|---:|---:|---:|---:|")
    for mib in sizes:
        elements = mib * 1024 * 1024 // 4
        kept = torch.zeros(elements)
        reused = median_seconds(kept.zero_)
        del kept
        fresh = median_seconds(lambda: torch.zeros(elements))
        extra = (fresh - reused) / (4 * elements)
        print(f"| {mib} MiB | {reused * 1e3:.2f} ms | {fresh * 1e3:.2f} ms | {extra * 1e9:.3f} ns |")


if __name__ == "__main__":
    main()
