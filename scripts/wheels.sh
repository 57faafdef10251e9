# Sourced by env.sh and gpu_bundle.sh: the pins of the header-only CUDA wheels and the one check of a virtual
# environment's wheels.

# Header-only CUDA wheels the tch shim's NCCL engine (crates/trainbench-backend-tch/shim/nccl.cpp) compiles against beside the
# wheel's own CUDA headers (cuda_runtime.h includes CCCL's and the CRT's headers); 3.3 MB, no libraries. The same
# CUDA 13.0 headers serve every PyTorch release the project builds against.
CUDA_CCCL_VERSION=13.0.85
CUDA_CRT_VERSION=13.0.88

# MLCommons' MLPerf logging tools (`python -m mlperf_logging.compliance_checker`), which tests/it/mlperf.rs runs on
# the logs `trainbench run --mllog` writes; pure Python (it needs PyYAML, installed with it).
MLPERF_LOGGING_VERSION=4.1.68

# has_wheels VENV NAME VERSION [NAME VERSION ...]: whether VENV holds each wheel at that version, checked by name
# and version (its installed metadata, local tags such as +cu130 dropped), not by a path or an import that
# another install could satisfy.
has_wheels() {
    local venv="$1"
    shift
    [[ -x "$venv/bin/python" ]] && "$venv/bin/python" - "$@" <<'PY' 2>/dev/null
import importlib.metadata as metadata, sys
pairs = sys.argv[1:]
for name, version in zip(pairs[::2], pairs[1::2]):
    try:
        if metadata.version(name).split("+")[0] != version:
            sys.exit(1)
    except metadata.PackageNotFoundError:
        sys.exit(1)
PY
}
