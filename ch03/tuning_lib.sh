#!/usr/bin/env bash
# Shared by the chapter's scripts (sourced, not run): the root check and whole-file writes.

# Exit 1 unless running as root; nothing has been changed when this refuses.
need_root() {
    if [[ $(id -u) -ne 0 ]]; then
        echo "--apply needs root (sudo $1 --apply); nothing changed" >&2
        exit 1
    fi
}

# Write $2 to file $1 whole (temp file + rename) only if it differs: re-running never appends.
write_whole() {
    local target="$1" text="$2"
    mkdir -p "$(dirname "$target")"
    if [[ -f "$target" ]] && [[ "$(cat "$target")" == "$text" ]]; then
        echo "$target already up to date"
        return
    fi
    printf '%s\n' "$text" > "$target.tmp" && mv "$target.tmp" "$target"
    echo "wrote $target"
}

# For scripts whose only option is --apply: sets apply=1 for it, runs the caller's usage() for
# -h/--help, and exits 2 on anything else.
# shellcheck disable=SC2034  # apply is read by the sourcing script
parse_apply_only() {
    apply=0
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --apply) apply=1; shift ;;
            -h|--help) usage; exit 0 ;;
            *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
        esac
    done
}
