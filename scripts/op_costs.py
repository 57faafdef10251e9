"""Per-operation CPU cost of the libtorch operations a small Transformer trains with, against the time the
performance model's memory term gives them (bytes moved over the bandwidth of an add of the same working set).

Run with the project's Python (`source scripts/env.sh; python3 scripts/op_costs.py`). One intra-op thread, each
figure the median of 7 samples of repeated calls (each sample at least 20 ms of the process's CPU clock, as
`trainbench calibrate --cpu-threads 1 --cpu-clock`). Sizes are those of specs/smoke/transformer_tiny.toml at
batch 64 (64 x 16 tokens, d_model 64, 4 heads, ffn 128). Prints a Markdown table.
"""

import statistics
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)


def cpu_seconds(f, samples=7, min_s=0.02):
    f()
    out = []
    for _ in range(samples):
        calls, start = 0, time.process_time()
        while True:
            f()
            calls += 1
            spent = time.process_time() - start
            if spent >= min_s:
                break
        out.append(spent / calls)
    return statistics.median(out)


B, T, D, H, F = 64, 16, 64, 4, 128
x = torch.randn(B, T, D)
x2 = x.reshape(B * T, D)
w1 = torch.randn(F, D)
scores = torch.randn(B * H, T, T)
mha = torch.nn.MultiheadAttention(D, H, batch_first=True)

# The add's bandwidth at this working set: what the model's memory term charges per byte.
add_s = cpu_seconds(lambda: torch.add(x, x, out=torch.empty_like(x)))
add_bytes = 3 * x.numel() * 4
bandwidth = add_bytes / add_s

rows = [
    ("add (the bandwidth reference)", x.numel(), 3, lambda: x + x),
    ("linear 1024x64 -> 128", B * T * F, None, lambda: torch.nn.functional.linear(x2, w1)),
    ("dropout p=0.1 (training)", x.numel(), 3, lambda: torch.nn.functional.dropout(x, 0.1, True)),
    ("relu", x.numel(), 2, lambda: torch.relu(x)),
    ("layer_norm over d_model", x.numel(), 3, lambda: torch.nn.functional.layer_norm(x, (D,))),
    ("softmax over keys", scores.numel(), 3, lambda: torch.softmax(scores, -1)),
    ("multi-head attention (forward)", x.numel(), None, lambda: mha(x, x, x, need_weights=False)),
]
print(f"Add over 3 x {x.numel()} fp32 elements: {bandwidth / 1e9:.1f} GB/s (one thread, CPU clock)")
print()
print("| operation | elements | us per call | ns per element | memory term (us) | measured / memory term |")
print("|---|---:|---:|---:|---:|---:|")
for name, elements, passes, f in rows:
    s = cpu_seconds(f)
    if passes is None:
        term, ratio = "-", "-"
    else:
        t = passes * elements * 4 / bandwidth
        term, ratio = f"{t * 1e6:.1f}", f"{s / t:.1f}x"
    print(f"| {name} | {elements} | {s * 1e6:.1f} | {s / elements * 1e9:.2f} | {term} | {ratio} |")
