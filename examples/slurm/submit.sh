#!/usr/bin/env bash
# Submit the shard array, then the merge job once every shard has ended (successfully or not:
# a failed shard still leaves its measured runs, and the merge reports what is there).
#   ./submit.sh [SHARDS]      (default 8; run from the cctest checkout, after scripts/setup.sh)
# Prints the two job ids, the array's then the merge's. Submitted again with the same SHARDS, the
# array skips the shards that completed. Partition, account, QoS: sbatch's own environment
# variables (SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_QOS; docs/scale-out.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shards=${1:-8}
array=$(sbatch --parsable --array="1-$shards" "$here/shards.sbatch")
array=${array%%;*}
merge=$(sbatch --parsable --dependency="afterany:$array" "$here/merge.sbatch")
echo "$array ${merge%%;*}"
