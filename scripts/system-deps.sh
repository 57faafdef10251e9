#!/usr/bin/env bash
# Installs the Debian packages trainbench's tests use, when missing: software Vulkan (lavapipe) for the wgpu
# backend and Chromium for the report's browser test. Needs root (or sudo); does nothing when all are present.
set -euo pipefail
need=()
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -e /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ] || need+=(mesa-vulkan-drivers)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "==> installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q "${need[@]}" >/dev/null || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "${need[@]}" >/dev/null; }
