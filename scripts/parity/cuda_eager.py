"""GPU parity, PyTorch side: the TBD ResNet-50 (torchvision's, 1000 classes, 224x224) trained in plain PyTorch
eager mode on a CUDA device the way `trainbench run specs/tbd/resnet50.toml` trains it, for scripts/gpu_check.sh.

Usage: cuda_eager.py [--batch N] [--precision fp32|fp16|bf16] [--warmup N] [--iters N] [--free N]
                     [--tf32-matmul 0|1] [--tf32-cudnn 0|1] [--fused]

As trainbench: SGD (lr 0.1, momentum 0.9, weight decay 1e-4), cudnn.benchmark on, a pool of 4 synthetic batches
in pinned host memory copied with non_blocking each step, gradients set to none; fp16 and bf16 through
autocast, fp16 with a GradScaler; the TF32 switches as given (PyTorch's defaults: matmul 0, cuDNN 1). The
optimizer is PyTorch's default on CUDA (foreach) unless --fused.

Two figures, as trainbench reports them: the per-step median (each step ends with loss.item(), one
synchronisation), and a free-running window of --free steps with no synchronisation until the end. Also the
allocator's peak (torch.cuda.max_memory_allocated) over the measured steps. Prints one RESULT line.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="fp32")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--free", type=int, default=50)
    ap.add_argument("--tf32-matmul", type=int, default=0)
    ap.add_argument("--tf32-cudnn", type=int, default=1)
    ap.add_argument("--fused", action="store_true")
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32_matmul)
    torch.backends.cudnn.allow_tf32 = bool(a.tf32_cudnn)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=1000).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, fused=a.fused or None)
    scaler = torch.amp.GradScaler("cuda") if a.precision == "fp16" else None
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    pool = [
        (torch.randn(a.batch, 3, 224, 224).pin_memory(), torch.randint(0, 1000, (a.batch,)).pin_memory())
        for _ in range(4)
    ]

    def step(i: int) -> torch.Tensor:
        x, y = pool[i % len(pool)]
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss.detach()

    for i in range(a.warmup):
        step(i).item()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(a.iters):
        t0 = time.perf_counter()
        step(i).item()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(a.free):
        step(i)
    torch.cuda.synchronize()
    free_s = time.perf_counter() - t0
    median = statistics.median(times)
    print(
        f"RESULT impl=pytorch model=resnet50 device={torch.cuda.get_device_name()} batch={a.batch} "
        f"precision={a.precision} tf32_matmul={a.tf32_matmul} tf32_cudnn={a.tf32_cudnn} fused={int(a.fused)} "
        f"median_s={median:.6f} samples_per_s={a.batch / median:.2f} "
        f"free_samples_per_s={a.batch * a.free / free_s:.2f} max_memory_allocated={peak} torch={torch.__version__}"
    )


if __name__ == "__main__":
    main()
