"""trainbench's seeded values in NumPy: the initial weights (trainbench_graph::init::initial_values) and
synthetic batches (init::synthetic_input) bit for bit, so a PyTorch model can start from the same weights and
see the same data as a trainbench run. Reads the manifest written by `parity --manifest FILE`.

SplitMix64 keyed by FNV-1a of the tensor/input name; uniform = top 24 bits / 2^24 (f32); normal = Box-Muller
in f64 over pairs of uniforms, rounded to f32.
"""

import json

import numpy as np
import torch

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
STEP_MIX = 0x2545F4914F6CDD1D


def _fnv1a(stream: str) -> int:
    h = 0xCBF29CE484222325
    for b in stream.encode():
        h ^= b
        h = (h * 0x100000001B3) & MASK
    return h


def _u64(seed: int, stream: str, n: int) -> np.ndarray:
    """The first n outputs of SeededRng::new(seed, stream) (which discards one output on creation)."""
    s0 = _fnv1a(stream) ^ ((seed * GAMMA) & MASK)
    k = np.arange(2, n + 2, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(s0) + k * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z


def _uniform(z: np.ndarray) -> np.ndarray:
    return (z >> np.uint64(40)).astype(np.float32) / np.float32(1 << 24)


def _normal(seed: int, stream: str, n: int) -> np.ndarray:
    u = _uniform(_u64(seed, stream, 2 * n)).astype(np.float64)
    u1 = np.maximum(u[0::2], 1e-12)
    u2 = u[1::2]
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)).astype(np.float32)


def initial_values(decl: dict, seed: int) -> np.ndarray:
    n = int(np.prod(decl["shape"], dtype=np.int64))
    init = decl["init"]
    if init["kind"] == "zeros":
        v = np.zeros(n, np.float32)
    elif init["kind"] == "ones":
        v = np.ones(n, np.float32)
    elif init["kind"] == "uniform":
        u = _uniform(_u64(seed, decl["name"], n))
        v = (u * np.float32(2.0) - np.float32(1.0)) * np.float32(init["bound"])
    else:
        v = _normal(seed, decl["name"], n) * np.float32(init["std"])
    return v.reshape(decl["shape"])


def synthetic_input(inp: dict, batch: int, seed: int, step: int) -> torch.Tensor:
    shape = [batch] + list(inp["shape"])
    n = int(np.prod(shape, dtype=np.int64))
    s = (seed ^ ((step * STEP_MIX) & MASK)) & MASK
    kind = inp["kind"]
    if kind["kind"] == "dense":
        return torch.from_numpy(_normal(s, inp["name"], n).reshape(shape))
    span = kind.get("vocab", kind.get("classes"))
    ids = (_u64(s, inp["name"], n) % np.uint64(span)).astype(np.int64)
    return torch.from_numpy(ids.reshape(shape))


def load_manifest(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def init_model(model: torch.nn.Module, manifest: dict) -> None:
    """Copy the manifest's initial values into the model's parameters and buffers, by name (graph names follow
    PyTorch's module names); every declared tensor must exist with the same shape, and vice versa."""
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    declared = {d["name"]: d for d in manifest["tensors"]}
    missing = sorted(set(state) - set(declared))
    extra = sorted(set(declared) - set(state))
    if missing or extra:
        raise SystemExit(f"model and manifest differ: only in model {missing}, only in manifest {extra}")
    with torch.no_grad():
        for name, t in state.items():
            values = torch.from_numpy(initial_values(declared[name], manifest["seed"]))
            if tuple(values.shape) != tuple(t.shape):
                raise SystemExit(f"{name}: model shape {tuple(t.shape)} != manifest {tuple(values.shape)}")
            t.copy_(values)


def data_pool(manifest: dict, batch: int, count: int = 4) -> list:
    """Batches 0..count of every input, in graph-input order."""
    seed = manifest["seed"]
    return [[synthetic_input(i, batch, seed, step) for i in manifest["inputs"]] for step in range(count)]
