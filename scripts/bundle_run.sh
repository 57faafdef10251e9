#!/usr/bin/env bash
# The launcher of a trainbench bundle (scripts/gpu_bundle.sh copies it into the bundle as run.sh): finds this
# machine's PyTorch through its Python (TRAINBENCH_PYTHON, else python3 on PATH), refuses to start unless it is the
# exact build the bundle was compiled against (bundle.env: version, git revision, CUDA version; exit 2), then execs
# trainbench-engine with that PyTorch's torch/lib and nvidia/*/lib first on LD_LIBRARY_PATH.
#
#   run.sh ARGS...               as `trainbench ARGS...` (devices, run SPEC, plan SPEC, ...)
#   run.sh --bundle-info         the bundle's build, the PyTorch found here and any library the engine would miss,
#                                then exit (0 when the builds match)
#
# The binaries carry no rpath: the libraries are this machine's own. A mismatch is refused rather than tried,
# because the shim passes libtorch's C++ classes across the boundary and a different layout corrupts memory
# without failing.
set -euo pipefail
HERE="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
# shellcheck source=/dev/null
source "$HERE/bundle.env"
PY="${TRAINBENCH_PYTHON:-python3}"
# Reads torch/version.py without importing torch (milliseconds instead of seconds) and lists the library folders.
if ! found=$("$PY" - 2>&1 <<'PY'
import glob, importlib.util, os, sys
spec = importlib.util.find_spec("torch")
if spec is None or spec.origin is None:
    sys.exit("no module named torch")
pkg = os.path.dirname(spec.origin)
ns = {}
exec(open(os.path.join(pkg, "version.py")).read(), ns)
site = os.path.dirname(pkg)
libs = [os.path.join(pkg, "lib")] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
print(ns["__version__"], ns.get("git_version") or "unknown", ns.get("cuda") or "none", ":".join(libs))
PY
); then
    echo "trainbench bundle: cannot find PyTorch through $PY: ${found##*$'\n'}" >&2
    echo "  (this bundle needs PyTorch $BUNDLE_TORCH_VERSION; TRAINBENCH_PYTHON=path picks another Python)" >&2
    exit 2
fi
read -r version git cuda libs <<<"$found"
if [[ "${1:-}" == --bundle-info ]]; then
    echo "bundle: PyTorch $BUNDLE_TORCH_VERSION (git $BUNDLE_TORCH_GIT, CUDA $BUNDLE_TORCH_CUDA), tch $BUNDLE_TCH," \
        "trainbench $BUNDLE_COMMIT, built $BUNDLE_BUILT"
    echo "here:   PyTorch $version (git $git, CUDA $cuda) through $PY"
    echo "libraries: $libs"
    missing=$(LD_LIBRARY_PATH="$libs" ldd "$HERE/trainbench-engine" 2>&1 | awk '/not found/ {print $1}' | tr '\n' ' ' || true)
    echo "missing from them: ${missing:-nothing}"
fi
if [[ "$version" != "$BUNDLE_TORCH_VERSION" || "$git" != "$BUNDLE_TORCH_GIT" || "$cuda" != "$BUNDLE_TORCH_CUDA" ]]; then
    echo "trainbench bundle: built against PyTorch $BUNDLE_TORCH_VERSION (git ${BUNDLE_TORCH_GIT:0:12}, CUDA" \
        "$BUNDLE_TORCH_CUDA), but $PY has PyTorch $version (git ${git:0:12}, CUDA $cuda); its libraries would" \
        "corrupt memory instead of failing, so this bundle will not start. Build one against this PyTorch" \
        "(scripts/gpu_bundle.sh --torch ${version%%+*} builds against PyPI's wheel of that release)." >&2
    exit 2
fi
[[ "${1:-}" == --bundle-info ]] && exit 0
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$HERE/trainbench-engine" "$@"
