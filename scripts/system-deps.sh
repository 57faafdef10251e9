#!/usr/bin/env bash
# Installs the Debian packages trainbench's build and tests use, when missing. Decides by package, never by a file
# that some other package may also own: each name below is checked with dpkg-query, and the missing ones are
# installed in one apt-get install (apt-get update first when that fails). Needs root (or sudo); does nothing and
# prints nothing when all are installed. `--list` prints the declared packages, one a line, and exits.
set -euo pipefail

# What each package is for:
packages=(
    # bindgen (mpi-sys, the `mpi` feature's engine) loads libclang.so and clang's own headers; a fresh Debian 12
    # ships only libclang-cpp14, which is another library.
    libclang-dev
    # Open MPI: headers and libmpi for mpi-sys, mpirun for data-parallel runs on CPU ranks.
    libopenmpi-dev
    openmpi-bin
    # Software Vulkan (lavapipe) and the Vulkan loader, for the wgpu backend and its tests.
    libvulkan1
    mesa-vulkan-drivers
    # Headless Chromium for the report's browser test (tests/it/report_browser.rs).
    chromium
    # A single-node Slurm with munge (tests/it/slurm.rs through scripts/slurm-local.sh).
    slurmctld
    slurmd
    slurm-client
    munge
    # A throw-away PostgreSQL server for the history store's tests (tests/it/history_pg.rs through
    # scripts/postgres-local.sh).
    postgresql
)

if [ "${1:-}" = "--list" ]; then
    printf '%s\n' "${packages[@]}"
    exit 0
fi

installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

need=()
for package in "${packages[@]}"; do
    installed "$package" || need+=("$package")
done
[ ${#need[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "==> installing Debian packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q "${need[@]}" >/dev/null ||
    { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "${need[@]}" >/dev/null; }
missing=()
for package in "${need[@]}"; do
    installed "$package" || missing+=("$package")
done
if [ ${#missing[@]} -ne 0 ]; then
    echo "error: still not installed after apt-get install: ${missing[*]}" >&2
    exit 1
fi
