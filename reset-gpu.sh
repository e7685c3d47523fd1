#!/usr/bin/env bash
# Recover a wedged NVIDIA GPU: stop the processes using it, turn persistence mode off, reset it
# through NVML (nvidia-smi --gpu-reset), optionally reload the NVIDIA kernel modules, and turn
# persistence mode back on.
#
# Dry run by default: prints every step and changes nothing. It acts only with --yes AND as root.
# Never run it on a shared machine: it kills other users' jobs on that GPU.
#
# Usage: sudo ./reset-gpu.sh [--gpu INDEX] [--reload-modules] [--yes]
#   --gpu INDEX       the GPU to reset (default 0)
#   --reload-modules  also unload and reload the nvidia kernel modules (affects every GPU)
#   --yes             really do it (otherwise: dry run)
set -euo pipefail

GPU=0
YES=0
RELOAD=0

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

while (($#)); do
    case "$1" in
        --gpu) GPU="${2:?--gpu needs an index}"; shift ;;
        --reload-modules) RELOAD=1 ;;
        --yes) YES=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

if ! [[ $GPU =~ ^[0-9]+$ ]]; then echo "--gpu takes an index, got '$GPU'" >&2; exit 2; fi
if ((YES)) && [[ $EUID -ne 0 ]]; then
    echo "refusing: resetting a GPU needs root (run with sudo); nothing done" >&2
    exit 2
fi
if ((YES)) && ! command -v nvidia-smi >/dev/null; then
    echo "refusing: nvidia-smi not found; nothing done" >&2
    exit 1
fi

step() {
    if ((YES)); then
        echo "+ $*"
        "$@"
    else
        echo "would run: $*"
    fi
}

gpu_pids() {
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi -i "$GPU" --query-compute-apps=pid --format=csv,noheader | tr -d ' '
    fi
}

if ((YES)); then echo "Resetting GPU $GPU."; else echo "Dry run (add --yes, as root, to act); GPU $GPU:"; fi
mapfile -t pids < <(gpu_pids)
if ((${#pids[@]})); then
    step kill -TERM "${pids[@]}"
    if ((YES)); then sleep 5; fi
    mapfile -t left < <(gpu_pids)
    if ((${#left[@]})); then step kill -KILL "${left[@]}"; fi
else
    echo "no compute processes on GPU $GPU"
fi
step nvidia-smi -i "$GPU" -pm 0
step nvidia-smi -i "$GPU" --gpu-reset
if ((RELOAD)); then
    step modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia
    step modprobe nvidia
    step modprobe nvidia_uvm
fi
step nvidia-smi -i "$GPU" -pm 1
step nvidia-smi -i "$GPU" --query-gpu=index,name,pstate,temperature.gpu --format=csv
