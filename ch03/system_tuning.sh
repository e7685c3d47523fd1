#!/usr/bin/env bash
# Host kernel knobs for GPU jobs, through `aisp system`: audit, plan, apply, persist.
#
#   ch03/system_tuning.sh [--profile training|inference]            check only (default): audit + plan
#   sudo ch03/system_tuning.sh --apply [--profile P] [--persist]    write what differs, verify, save a state file
#   sudo aisp system tune --rollback /var/lib/aisp/tune-...json      undo an apply
#
# Applies only what `aisp system tune` plans (NUMA balancing, THP enabled/defrag, swappiness, dirty
# ratios, CPU governor); those revert on reboot. --persist also writes the sysctl values to one owned
# drop-in, $ETC_DIR/sysctl.d/90-aisp.conf, rewritten whole (never appended), so re-running is safe.
# Never: swapoff, GPU reset, ECC/MIG changes, kernel command line - printed as manual steps.
# Environment: AISP_ROOT (default /) is the /proc and /sys root, ETC_DIR (default /etc) where the
# drop-in goes; the tests point both at temporary folders.
set -euo pipefail
# shellcheck source=ch03/tuning_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tuning_lib.sh"

profile=training
apply=0
persist=0
usage() { sed -n '2,14p' "$0"; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --profile) profile="${2:?--profile needs a value}"; shift 2 ;;
        --apply) apply=1; shift ;;
        --persist) persist=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
root="${AISP_ROOT:-/}"
etc="${ETC_DIR:-/etc}"

aisp_cmd() {
    if command -v aisp >/dev/null 2>&1; then aisp "$@"; else python3 -m aisp "$@"; fi
}

sysctl_dropin() {
    local ratio bg
    if [[ "$profile" == training ]]; then ratio=40; bg=10; else ratio=10; bg=3; fi
    printf '# Written by ch03/system_tuning.sh (profile %s); rewritten whole on every run.\n' "$profile"
    printf 'kernel.numa_balancing = 0\nvm.swappiness = 10\nvm.dirty_ratio = %s\nvm.dirty_background_ratio = %s\n' \
        "$ratio" "$bg"
}

if [[ $apply -eq 0 ]]; then
    status=0
    aisp_cmd system audit --profile "$profile" --root "$root" || status=$?
    aisp_cmd system tune --profile "$profile" --root "$root"
    echo "check only: nothing changed (audit exit code $status). Apply with: sudo $0 --apply --profile $profile"
    exit 0
fi

need_root "$0"
aisp_cmd system tune --profile "$profile" --root "$root" --apply
if [[ $persist -eq 1 ]]; then
    write_whole "$etc/sysctl.d/90-aisp.conf" "$(sysctl_dropin)"
    echo "sysctl values load at boot (systemd-sysctl); THP and governor persist via tuned or the kernel command line"
fi
