#!/usr/bin/env bash
# Installs the Debian packages trainbench's build and tests use, when missing: software Vulkan (lavapipe) for the
# wgpu backend, Chromium for the report's browser test, and Open MPI with libclang (the `mpi` feature's engine for
# data-parallel runs on CPU ranks; bindgen reads mpi.h), and Slurm with munge (tests/it/slurm.rs starts a single-node
# Slurm through scripts/slurm-local.sh). Needs root (or sudo); does nothing when all are present.
set -euo pipefail
need=()
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -e /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ] || need+=(mesa-vulkan-drivers)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 || need+=(libopenmpi-dev openmpi-bin)
{ command -v slurmctld && command -v slurmd && command -v sbatch && command -v munged; } >/dev/null 2>&1 || need+=(slurmctld slurmd slurm-client munge)
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || ls /usr/lib/*/libclang-*.so* >/dev/null 2>&1 || need+=(libclang-dev)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "==> installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q "${need[@]}" >/dev/null || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "${need[@]}" >/dev/null; }
