#!/usr/bin/env bash
# Driver-level services and modules for GPU nodes.
#
#   ch03/gpu_setup_commands.sh            check only (default): show what is set up
#   sudo ch03/gpu_setup_commands.sh --apply
#
# --apply: enables and starts nvidia-persistenced (persistence that survives reboots) when it is
# not already enabled; loads nvidia-peermem (GPUDirect RDMA) when the module exists and is not
# loaded, and lists it in $ETC_DIR/modules-load.d/90-aisp-gpu.conf (written whole). Re-running
# changes nothing once done.
# Never: GPU reset, ECC or MIG mode, driver install - printed below as manual steps.
# Allocator: exporting MALLOC_CONF does nothing unless jemalloc is loaded; preload it per job:
#   LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 python train.py   (package libjemalloc2)
# Containers: docker run --gpus all --ipc=host --ulimit memlock=-1:-1 --cpuset-cpus=<GPU-local CPUs> ...
#   (--ipc=host or --shm-size=16g for DataLoader workers; no --privileged needed)
# Environment: ETC_DIR (default /etc) for tests.
set -euo pipefail
# shellcheck source=ch03/tuning_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tuning_lib.sh"

usage() { sed -n '2,17p' "$0"; }
parse_apply_only "$@"
etc="${ETC_DIR:-/etc}"
modules_file="$etc/modules-load.d/90-aisp-gpu.conf"

has_unit() { command -v systemctl >/dev/null 2>&1 && systemctl list-unit-files nvidia-persistenced.service >/dev/null 2>&1; }
loaded() { grep -q "^$1 " /proc/modules 2>/dev/null; }
exists() { command -v modinfo >/dev/null 2>&1 && modinfo "$1" >/dev/null 2>&1; }

if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version,persistence_mode,ecc.mode.current,mig.mode.current \
        --format=csv,noheader
else
    echo "nvidia-smi not found: no NVIDIA driver here"
fi
if has_unit; then
    echo "nvidia-persistenced: $(systemctl is-enabled nvidia-persistenced 2>/dev/null || true)," \
         "$(systemctl is-active nvidia-persistenced 2>/dev/null || true)"
else
    echo "nvidia-persistenced: no systemd unit"
fi
for module in nvidia_peermem nvidia_fs; do
    if loaded "$module"; then echo "$module: loaded"; elif exists "$module"; then echo "$module: available, not loaded"; else echo "$module: not installed"; fi
done

if [[ $apply -eq 0 ]]; then
    echo "check only: nothing changed. Apply with: sudo $0 --apply"
    exit 0
fi
need_root "$0"
if has_unit && [[ "$(systemctl is-enabled nvidia-persistenced 2>/dev/null || true)" != enabled ]]; then
    systemctl enable --now nvidia-persistenced
fi
if exists nvidia_peermem; then
    loaded nvidia_peermem || modprobe nvidia_peermem
    write_whole "$modules_file" $'# Written by ch03/gpu_setup_commands.sh; rewritten whole on every run.\nnvidia_peermem'
fi
cat <<'MANUAL'
manual steps (never run by this script):
  ECC on:        nvidia-smi -i N -e 1, then a GPU reset or reboot, with the GPU drained
  MIG mode:      nvidia-smi -i N -mig 1|0, then a GPU reset; slices with nvidia-smi mig -cgi/-cci
  GPU reset:     nvidia-smi -i N -r (kills every process on that GPU)
  MPS:           nvidia-cuda-mps-control -d (one daemon per node, for many small processes per GPU)
MANUAL
