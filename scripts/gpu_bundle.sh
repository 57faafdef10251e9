#!/usr/bin/env bash
# Builds a trainbench bundle for a machine whose PyTorch is not the 2.13.0 this repository links by default (a GPU
# machine or a cluster's container with its own PyTorch, no Rust toolchain): `trainbench` and `trainbench-engine`
# compiled (release, --features tch, the NCCL engine included) against PyTorch VERSION's own headers and
# libraries, stripped, with no rpath, into the ignored folder .gpu-bundle/ of this checkout, beside `run.sh`, which
# finds that machine's PyTorch through its python3, refuses to start against any other build of PyTorch (exit 2),
# and execs the engine with the machine's torch/lib and nvidia/*/lib on LD_LIBRARY_PATH.
#
#   scripts/gpu_bundle.sh [--torch 2.11.0] [--out DIR]
#   .gpu-bundle/run.sh devices                     on the target machine (TRAINBENCH_PYTHON=path picks its Python)
#   scripts/gpu_check.sh --bundle .gpu-bundle      the GPU check from the bundle
#
# Why a separate build: the shim and the NCCL engine pass libtorch's C++ classes across the library boundary, so a
# binary runs only on the PyTorch build whose headers it was compiled against (another one corrupts memory rather
# than failing); and tch's generated wrappers exist for one PyTorch release each, so the tch version changes with
# PyTorch. Cargo cannot choose between two versions of a `links` crate by feature: the build runs in a scratch git
# worktree (the working tree's files copied over its HEAD) whose crates/trainbench-backend-tch/Cargo.toml asks for the matching tch.
#
# Where things go (all outside the checkout except the bundle, so nothing large travels with the working tree):
#   TRAINBENCH_BUNDLE_VENV     Python environment with that PyTorch  (default ~/.cache/trainbench/torch-VERSION)
#   TRAINBENCH_BUNDLE_SCRATCH  the scratch worktree                  (default ~/.cache/trainbench/bundle-src-VERSION)
#   TRAINBENCH_BUNDLE_TARGET   its cargo target folder               (default ~/.cache/trainbench/bundle-target-VERSION)
# Needs network for the first run (pip: PyTorch and its CUDA libraries, about 5 GB; crates.io: the other tch).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH=2.11.0
OUT_DIR="$ROOT/.gpu-bundle"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --torch) TORCH=$2; shift ;;
        --out) OUT_DIR=$2; shift ;;
        *) echo "usage: $0 [--torch 2.11.0] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done

# The tch release generated for each PyTorch release this script has built against (crates.io has 0.24 and 0.26).
case "$TORCH" in
    2.13.0) TCH=0.26 ;;
    2.11.0) TCH=0.24 ;;
    *) echo "gpu_bundle.sh: no tch release known for PyTorch $TORCH (known: 2.13.0 -> tch 0.26, 2.11.0 -> 0.24)" >&2
       exit 2 ;;
esac
# The header-only CUDA wheels the NCCL engine compiles against, and the check of a venv's wheels.
source "$ROOT/scripts/wheels.sh"

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/trainbench"
VENV="${TRAINBENCH_BUNDLE_VENV:-$CACHE/torch-$TORCH}"
SCRATCH="${TRAINBENCH_BUNDLE_SCRATCH:-$CACHE/bundle-src-$TORCH}"
TARGET="${TRAINBENCH_BUNDLE_TARGET:-$CACHE/bundle-target-$TORCH}"
case "$VENV/" in "$ROOT"/*) echo "gpu_bundle.sh: the environment must be outside the checkout ($VENV)" >&2; exit 2 ;; esac
case "$SCRATCH/" in "$ROOT"/*) echo "gpu_bundle.sh: the scratch worktree must be outside the checkout" >&2; exit 2 ;; esac
say() { echo "==> $*" >&2; }

# 1. The Python environment with that PyTorch and the CUDA header wheels, checked by installed name and version.
if ! has_wheels "$VENV" torch "$TORCH" nvidia-cuda-cccl "$CUDA_CCCL_VERSION" nvidia-cuda-crt "$CUDA_CRT_VERSION"; then
    say "installing PyTorch $TORCH and the CUDA header wheels into $VENV (about 5 GB, a few minutes)"
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "torch==$TORCH" \
        "nvidia-cuda-cccl==$CUDA_CCCL_VERSION" "nvidia-cuda-crt==$CUDA_CRT_VERSION"
fi
# What the bundle is bound to: the exact build (version with its local tag, git revision, CUDA version).
read -r TORCH_FULL TORCH_GIT TORCH_CUDA < <("$VENV/bin/python" - <<'PY'
import importlib.util, os
spec = importlib.util.find_spec("torch")
ns = {}
exec(open(os.path.join(os.path.dirname(spec.origin), "version.py")).read(), ns)
print(ns["__version__"], ns["git_version"], ns.get("cuda") or "none")
PY
)
if [[ -z ${TORCH_GIT:-} ]]; then
    echo "gpu_bundle.sh: cannot read torch/version.py in $VENV" >&2
    exit 1
fi
say "PyTorch $TORCH_FULL (git $TORCH_GIT, CUDA $TORCH_CUDA) in $VENV; tch $TCH"

# 2. The scratch worktree: HEAD of this checkout, then its working tree's files (tracked and untracked, not ignored;
# deleted ones removed), then the manifest asking for the matching tch. Files are written only when they differ,
# so a second run rebuilds only what changed.
HEAD_SHA=$(git -C "$ROOT" rev-parse HEAD)
DIRTY=$(git -C "$ROOT" status --porcelain --untracked-files=normal | grep -c . || true)
if [[ ! -e "$SCRATCH/.git" ]]; then
    say "creating the scratch worktree $SCRATCH"
    mkdir -p "$(dirname "$SCRATCH")"
    git -C "$ROOT" worktree add --detach --quiet "$SCRATCH" "$HEAD_SHA"
elif [[ $(git -C "$SCRATCH" rev-parse HEAD) != "$HEAD_SHA" ]]; then
    git -C "$SCRATCH" checkout --quiet --detach --force "$HEAD_SHA"
fi
sync_tree() {
    local f
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) | while IFS= read -r -d '' f; do
        if [[ -f "$ROOT/$f" ]]; then
            if ! cmp -s "$ROOT/$f" "$SCRATCH/$f"; then
                mkdir -p "$SCRATCH/$(dirname "$f")"
                cp -p "$ROOT/$f" "$SCRATCH/$f"
            fi
        elif [[ -e "$SCRATCH/$f" && ! -e "$ROOT/$f" ]]; then
            rm -f "$SCRATCH/$f"
        fi
    done
}
sync_tree
MANIFEST="$SCRATCH/crates/trainbench-backend-tch/Cargo.toml"
sed -E "s/^(tch|torch-sys) = \"[^\"]*\"/\1 = \"$TCH\"/" "$ROOT/crates/trainbench-backend-tch/Cargo.toml" >"$MANIFEST.new"
if ! grep -q "^tch = \"$TCH\"" "$MANIFEST.new" || ! grep -q "^torch-sys = \"$TCH\"" "$MANIFEST.new"; then
    echo "gpu_bundle.sh: crates/trainbench-backend-tch/Cargo.toml no longer has the lines tch = \"...\" and torch-sys = \"...\"" >&2
    exit 1
fi
if cmp -s "$MANIFEST.new" "$MANIFEST"; then rm "$MANIFEST.new"; else mv "$MANIFEST.new" "$MANIFEST"; fi
# Cargo.lock follows the swapped manifest (cargo updates the scratch copy, which is never copied back).

# 3. The release build against that environment, no rpath (run.sh supplies the target machine's libraries).
say "release build in $SCRATCH (target $TARGET)"
start=$(date +%s)
LOG="$TARGET/gpu-bundle-build.jsonl"
mkdir -p "$TARGET"
(
    cd "$SCRATCH"
    export VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" LIBTORCH_USE_PYTORCH=1 TRAINBENCH_NO_RPATH=1
    export CARGO_TARGET_DIR="$TARGET"
    unset LIBTORCH LIBTORCH_BYPASS_VERSION_CHECK
    # JSON messages on stdout (the build script's cfgs say whether the NCCL engine was compiled, even when the
    # build is fresh), diagnostics rendered on stderr as usual.
    cargo build --release --features tch --message-format=json-render-diagnostics >"$LOG"
)
secs=$(( $(date +%s) - start ))
say "built in ${secs} s"
nccl=$(python3 - "$LOG" <<'PY'
import json, sys
state = "unknown"
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "build-script-executed" and m.get("package_id", "").find("trainbench-backend-tch") >= 0:
        state = "built" if "trainbench_nccl" in m.get("cfgs", []) else "missing"
    if m.get("reason") == "compiler-message" and "NCCL engine is not built" in json.dumps(m):
        state = "missing"
print(state)
PY
)
if [[ $nccl != built ]]; then
    echo "gpu_bundle.sh: the NCCL engine was left out of the build ($nccl; the build's warning above names what is" \
        "missing): a bundle for a GPU machine needs it" >&2
    exit 1
fi

# 4. The bundle: both binaries stripped, no rpath, the build they are bound to, and the launcher.
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR/trainbench" "$OUT_DIR/trainbench-engine"
for bin in trainbench trainbench-engine; do
    strip -o "$OUT_DIR/$bin" "$TARGET/release/$bin"
    if readelf -d "$OUT_DIR/$bin" | grep -Eq 'R(UN)?PATH'; then
        echo "gpu_bundle.sh: $bin has an rpath, which could load this machine's libtorch there" >&2
        exit 1
    fi
done
TCH_LOCKED=$(awk '/^name = "tch"$/ {getline; print $3}' "$SCRATCH/Cargo.lock" | tr -d '"')
cat >"$OUT_DIR/bundle.env" <<EOF
# The PyTorch build these binaries were compiled against (run.sh refuses any other) and how they were built.
BUNDLE_TORCH_VERSION=$TORCH_FULL
BUNDLE_TORCH_GIT=$TORCH_GIT
BUNDLE_TORCH_CUDA=$TORCH_CUDA
BUNDLE_TCH=$TCH_LOCKED
BUNDLE_COMMIT=$HEAD_SHA
BUNDLE_DIRTY_FILES=$DIRTY
BUNDLE_BUILT=$(date -u +%FT%TZ)
BUNDLE_BUILD_S=$secs
EOF
cp "$ROOT/scripts/bundle_run.sh" "$OUT_DIR/run.sh"
chmod +x "$OUT_DIR/run.sh"
say "bundle in $OUT_DIR ($(du -sh "$OUT_DIR" | cut -f1)): for PyTorch $TORCH_FULL ($TORCH_GIT)"
ls -l "$OUT_DIR" >&2
