"""GPU parity, PyTorch side: the TBD ResNet-50 (torchvision's, 1000 classes, 224x224) trained in plain PyTorch
eager mode on a CUDA device the way `trainbench run specs/tbd/resnet50.toml` trains it, for scripts/gpu_check.sh.

Usage: cuda_eager.py [--batch N] [--precision fp32|fp16|bf16] [--warmup N] [--iters N] [--free N]
                     [--tf32-matmul 0|1] [--tf32-cudnn 0|1] [--fused] [--device cuda|cpu]

torchvision's ResNet-50 when torchvision is installed, else the same network defined here (the same layers,
parameters, 25,557,032 of them, and initialisation), so that it runs on a machine that has PyTorch alone (a GPU
machine's own PyTorch under scripts/gpu_check.sh --bundle). `--device cpu` rehearses the script without a GPU
(fp32 or bf16, no pinned memory, no allocator peak).

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
from torch import nn

try:
    import torchvision
except Exception:  # PyTorch alone, or a torchvision built for another PyTorch: the network below
    torchvision = None


class Bottleneck(nn.Module):
    """ResNet v1.5's bottleneck block: 1x1, 3x3 (carrying the stride), 1x1 to 4x the width; a projection on the
    shortcut where the shape changes."""

    def __init__(self, inplanes: int, width: int, stride: int) -> None:
        super().__init__()
        out = width * 4
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


def resnet50(num_classes: int = 1000) -> nn.Module:
    """ResNet-50 as torchvision builds it (blocks 3, 4, 6, 3; convolutions Kaiming-normal fan-out, batch norms
    weight 1 and bias 0, the classifier with nn.Linear's own initialisation)."""
    if torchvision is not None:
        return torchvision.models.resnet50(num_classes=num_classes)
    layers, inplanes = [], 64
    for i, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        stage = []
        for b in range(blocks):
            stage.append(Bottleneck(inplanes, width, 2 if i > 0 and b == 0 else 1))
            inplanes = width * 4
        layers.append(nn.Sequential(*stage))
    model = nn.Sequential(
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1), *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(inplanes, num_classes),
    )
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return model


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
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    if not cuda and a.precision == "fp16":
        ap.error("fp16 (with its GradScaler) is for CUDA; use fp32 or bf16 on the CPU")
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32_matmul)
    torch.backends.cudnn.allow_tf32 = bool(a.tf32_cudnn)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = resnet50(num_classes=1000).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, fused=a.fused or None)
    scaler = torch.amp.GradScaler("cuda") if a.precision == "fp16" else None
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    pin = (lambda t: t.pin_memory()) if cuda else (lambda t: t)
    pool = [(pin(torch.randn(a.batch, 3, 224, 224)), pin(torch.randint(0, 1000, (a.batch,)))) for _ in range(4)]
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step(i: int) -> torch.Tensor:
        x, y = pool[i % len(pool)]
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(a.device, dtype=dtype, enabled=dtype is not None):
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
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(a.iters):
        t0 = time.perf_counter()
        step(i).item()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() if cuda else 0
    sync()
    t0 = time.perf_counter()
    for i in range(a.free):
        step(i)
    sync()
    free_s = time.perf_counter() - t0
    median = statistics.median(times)
    device = torch.cuda.get_device_name() if cuda else "cpu"
    network = "torchvision" if torchvision is not None else "own"
    print(
        f"RESULT impl=pytorch model=resnet50 network={network} device={device} batch={a.batch} "
        f"precision={a.precision} tf32_matmul={a.tf32_matmul} tf32_cudnn={a.tf32_cudnn} fused={int(a.fused)} "
        f"median_s={median:.6f} samples_per_s={a.batch / median:.2f} "
        f"free_samples_per_s={a.batch * a.free / free_s:.2f} max_memory_allocated={peak} torch={torch.__version__}"
    )


if __name__ == "__main__":
    main()
