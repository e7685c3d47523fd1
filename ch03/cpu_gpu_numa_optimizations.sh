#!/usr/bin/env bash
# CPU-side settings GPU jobs need that `aisp system tune` does not write: locked-memory limit and
# GPU persistence mode; plus a per-GPU NUMA locality report.
#
#   ch03/cpu_gpu_numa_optimizations.sh            check only (default): report, change nothing
#   sudo ch03/cpu_gpu_numa_optimizations.sh --apply
#
# --apply: writes $ETC_DIR/security/limits.d/90-aisp-memlock.conf (memlock unlimited, for RDMA
# registration by NCCL/GPUDirect; new logins get it) whole, only if it differs; turns persistence mode
# on with `nvidia-smi -i N -pm 1` only for GPUs where it is off (lost at reboot: for a persistent
# setting enable nvidia-persistenced, see gpu_setup_commands.sh). Safe to re-run after a reboot.
# Never: GPU reset, ECC or MIG changes, stopping irqbalance - those are printed as manual steps.
# Kernel knobs (governor, THP, swappiness, NUMA balancing) are system_tuning.sh's job.
# Environment: ETC_DIR (default /etc), SYSFS (default /sys) for tests.
set -euo pipefail
# shellcheck source=ch03/tuning_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tuning_lib.sh"

usage() { sed -n '2,15p' "$0"; }
parse_apply_only "$@"
etc="${ETC_DIR:-/etc}"
sysfs="${SYSFS:-/sys}"
memlock_file="$etc/security/limits.d/90-aisp-memlock.conf"
memlock_text=$'# Written by ch03/cpu_gpu_numa_optimizations.sh; rewritten whole on every run.\n* soft memlock unlimited\n* hard memlock unlimited'
have_gpu=0
command -v nvidia-smi >/dev/null 2>&1 && have_gpu=1

report() {
    echo "this shell: CPUs $(awk '/Cpus_allowed_list/ {print $2}' /proc/self/status), memlock $(ulimit -l)"
    if [[ -f "$memlock_file" ]]; then echo "$memlock_file present"; else echo "$memlock_file absent"; fi
    if [[ $have_gpu -eq 0 ]]; then
        echo "no nvidia-smi: GPU checks skipped"
        return
    fi
    while IFS=', ' read -r index bus pm; do
        local id="${bus,,}" node
        node=$(cat "$sysfs/bus/pci/devices/$(printf '%04x' "$((16#${id%%:*}))"):${id#*:}/numa_node" 2>/dev/null || echo "?")
        echo "GPU $index ($bus): NUMA node $node, persistence mode $pm"
    done < <(nvidia-smi --query-gpu=index,pci.bus_id,persistence_mode --format=csv,noheader)
}

report
if [[ $apply -eq 0 ]]; then
    echo "check only: nothing changed. Apply with: sudo $0 --apply"
    exit 0
fi
need_root "$0"
write_whole "$memlock_file" "$memlock_text"
echo "memlock applies to new login sessions; services: LimitMEMLOCK=infinity; docker: --ulimit memlock=-1:-1"
if [[ $have_gpu -eq 1 ]]; then
    while IFS=', ' read -r index pm; do
        if [[ "$pm" != "Enabled" ]]; then
            nvidia-smi -i "$index" -pm 1
        fi
    done < <(nvidia-smi --query-gpu=index,persistence_mode --format=csv,noheader)
fi
echo "manual (never automatic): ECC mode (nvidia-smi -e 1 + reset), MIG mode, irqbalance policy, BIOS C-states"
