#!/usr/bin/env bash
# Submit the sharded run and its merge: deploy/slurm/submit-shards.sh N [aisp bench run arguments]
#   AISP_SHARED=/shared/aisp deploy/slurm/submit-shards.sh 4 -t ch01 -t ch13
# N array tasks (one node each, shards 0/N ... N-1/N), then the merge once they have all ended,
# whatever their exit codes (afterany). Prints both job ids.
set -euo pipefail
N="${1:?usage: submit-shards.sh N [aisp bench run arguments]}"
shift
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive count, not '$N'" >&2; exit 2; }
: "${AISP_SHARED:?set AISP_SHARED to a folder every node mounts}"
here="$(dirname "$0")"
array=$(sbatch --parsable --array="0-$((N - 1))" "$here/aisp-shards.sbatch" "$@")
array="${array%%;*}"
merge=$(sbatch --parsable --dependency="afterany:$array" --export="ALL,AISP_MERGE=1,AISP_RUN=$array" \
    "$here/aisp-shards.sbatch")
echo "shards: job $array (array 0-$((N - 1))); merge: job ${merge%%;*} -> $AISP_SHARED/$array/merged"
