#!/usr/bin/env bash
# One process per GPU, each bound to its GPU's NUMA node.
#
#   ch03/numa_topology_script.sh                          show each GPU's node and CPUs, and the launch lines
#   ch03/numa_topology_script.sh --apply -- CMD [ARGS]    launch CMD once per GPU, bound, and wait for all
#
# The node comes from sysfs (/sys/bus/pci/devices/<bdf>/numa_node, local_cpulist) for the bus id
# nvidia-smi reports - never guessed from the GPU index. A node of -1 (firmware gave none) binds to
# the GPU's local CPUs only. Each process sees one GPU (CUDA_VISIBLE_DEVICES=<index>, with
# CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA and nvidia-smi number GPUs alike) and gets --gpu 0.
# --apply launches processes and changes no host setting, so it is the one script that needs no root.
# Environment: SYSFS (default /sys) for tests.
set -euo pipefail

apply=0
cmd=()
usage() { sed -n '2,13p' "$0"; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --apply) apply=1; shift ;;
        --) shift; cmd=("$@"); break ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
sysfs="${SYSFS:-/sys}"
if [[ $apply -eq 1 && ${#cmd[@]} -eq 0 ]]; then
    echo "--apply needs a command after --" >&2
    exit 2
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "nvidia-smi not found: no NVIDIA driver here" >&2
    exit 1
fi

# "00000000:3B:00.0" -> "0000:3b:00.0"
sysfs_bdf() {
    local id="${1,,}"
    printf '%04x:%s\n' "$((16#${id%%:*}))" "${id#*:}"
}

launch=()
pids=()
while IFS=', ' read -r index bus; do
    dev="$sysfs/bus/pci/devices/$(sysfs_bdf "$bus")"
    node=$(cat "$dev/numa_node" 2>/dev/null || echo -1)
    cpus=$(cat "$dev/local_cpulist" 2>/dev/null || echo "")
    if [[ "$node" -ge 0 ]]; then
        launch=(numactl "--cpunodebind=$node" "--membind=$node")
    elif [[ -n "$cpus" ]]; then
        launch=(numactl "--physcpubind=$cpus")
    else
        launch=()
    fi
    echo "GPU $index ($bus): NUMA node $node, local CPUs ${cpus:-unknown}"
    echo "  launch: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$index ${launch[*]} ${cmd[*]:-CMD} --gpu 0"
    if [[ $apply -eq 1 ]]; then
        CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES="$index" "${launch[@]}" "${cmd[@]}" --gpu 0 &
        pids+=("$!")
    fi
done < <(nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader)

status=0
for pid in "${pids[@]}"; do
    wait "$pid" || status=$?
done
exit "$status"
