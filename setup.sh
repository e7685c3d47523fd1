#!/usr/bin/env bash
# Set up aisp on this machine: check the NVIDIA driver, CUDA and Python, install the package
# (editable), then measure this machine's ceilings with `aisp peak` (cached in peaks/).
#
# Run it as your own user. Root is used only for --system-packages, through sudo.
#
# Usage: ./setup.sh [--check-only] [--no-peak] [--system-packages]
#   --check-only       only report the driver, CUDA and Python found; change nothing
#   --no-peak          install, but do not run `aisp peak`
#   --system-packages  also apt-get install the build tools the chapters use (needs sudo)
set -euo pipefail

PYTHON="${PYTHON:-python3}"
CHECK_ONLY=0
PEAK=1
SYSTEM_PACKAGES=0
APT_PACKAGES=(build-essential numactl)

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

for arg in "$@"; do
    case "$arg" in
        --check-only) CHECK_ONLY=1 ;;
        --no-peak) PEAK=0 ;;
        --system-packages) SYSTEM_PACKAGES=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown option: $arg" >&2; usage >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")"

check_python() {
    if ! command -v "$PYTHON" >/dev/null; then
        echo "FAIL python: $PYTHON not found (need Python 3.10+)" >&2
        return 1
    fi
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
        echo "FAIL python: $("$PYTHON" --version 2>&1) is too old (need 3.10+)" >&2
        return 1
    fi
    echo "ok   python: $("$PYTHON" --version 2>&1)"
}

check_driver() {
    if ! command -v nvidia-smi >/dev/null; then
        echo "note driver: nvidia-smi not found; CPU-only setup (pairs that need CUDA will be skipped)"
        return 0
    fi
    local gpus
    if ! gpus="$(nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader)"; then
        echo "FAIL driver: nvidia-smi is installed but cannot talk to the driver" >&2
        return 1
    fi
    while IFS= read -r line; do echo "ok   gpu: $line"; done <<< "$gpus"
}

check_cuda() {
    if command -v nvcc >/dev/null; then
        echo "ok   nvcc: $(nvcc --version | grep -o 'release [0-9.]*')"
    else
        echo "note nvcc: not found; the chapters' CUDA C++ (.cu) examples cannot be built"
    fi
}

check_torch() {
    if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
        echo "note torch: not installed; pip will install the default PyPI build."
        echo "     For a specific CUDA build, install torch first (https://pytorch.org/get-started/locally/)."
        return 0
    fi
    "$PYTHON" -c 'import torch; print("ok   torch:", torch.__version__, "CUDA", torch.version.cuda,
                  "available" if torch.cuda.is_available() else "not available")'
}

install_system_packages() {
    local sudo=()
    if [[ $EUID -ne 0 ]]; then sudo=(sudo); fi
    "${sudo[@]}" apt-get update
    "${sudo[@]}" apt-get install -y "${APT_PACKAGES[@]}"
}

if [[ $EUID -eq 0 && -n "${SUDO_USER:-}" ]]; then
    echo "note: running under sudo installs aisp into root's Python; run as $SUDO_USER instead." >&2
fi

check_python
check_driver
check_cuda
check_torch
if ((CHECK_ONLY)); then exit 0; fi

if ((SYSTEM_PACKAGES)); then install_system_packages; fi
"$PYTHON" -m pip install -e .
if ((PEAK)); then "$PYTHON" -m aisp peak; fi
