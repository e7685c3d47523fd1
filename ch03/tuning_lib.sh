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
