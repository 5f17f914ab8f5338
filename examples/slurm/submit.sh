#!/usr/bin/env bash
# Submit the shard array, then the merge job once every shard has ended (successfully or not:
# a failed shard still leaves its measured runs, and the merge reports what is there).
#   ./submit.sh [SHARDS]      (default 8; run from the cctest checkout, after scripts/setup.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shards=${1:-8}
array=$(sbatch --parsable --array="1-$shards" "$here/shards.sbatch")
sbatch --dependency="afterany:${array%%;*}" "$here/merge.sbatch"
