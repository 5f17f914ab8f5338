#!/usr/bin/env bash
# Copy run directories into the repository as compact ones (docs/papers.md, "Publishing the reproduction"): everything
# `cctest check` and `cctest report` read stays; the raw captures (raw/) and the per-ACK table
# (tcp_probe.parquet, MBs per run) do not. A run directory already at DEST is left as it is.
#   scripts/compact-runs.sh SRC DEST     e.g. scripts/compact-runs.sh build/paper-002 results/paper-002
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: scripts/compact-runs.sh SRC DEST" >&2; exit 2; }
src=$1 dest=$2
[ -d "$src" ] || { echo "scripts/compact-runs.sh: $src: not a directory" >&2; exit 2; }
copied=0
while IFS= read -r -d '' meta; do
  run=$(dirname "$meta")
  into="$dest/${run#"$src"/}"
  [ -e "$into" ] && continue
  mkdir -p "$into"
  find "$run" -mindepth 1 -maxdepth 1 ! -name raw ! -name tcp_probe.parquet -exec cp -r {} "$into"/ \;
  copied=$((copied + 1))
done < <(find "$src" -name meta.json -not -path '*/raw/*' -print0)
echo "copied $copied run director$([ $copied = 1 ] && echo y || echo ies) into $dest ($(du -sh "$dest" | cut -f1))"
