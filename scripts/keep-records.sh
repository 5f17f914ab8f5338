#!/usr/bin/env bash
# Keeps a long campaign's results in the repository as they arrive: every INTERVAL seconds, each run
# directory under OUT that its guest has finished (status ok, unchanged for a minute and a half) is
# ingested if its session has not done it yet, with the code of CHECKOUT (the checkout the campaign
# runs from), its compact record written into PENDING/<scenario>/<run>/record.json by this
# checkout's `cctest record`, and the new records committed (that path only). A machine that keeps
# nothing outside the repository then loses at most the runs in flight (pending/README.md).
#
#   scripts/keep-records.sh OUT PENDING [CHECKOUT]     run from the repository's root, until stopped
#   scripts/keep-records.sh --once OUT PENDING [CHECKOUT]
#
# CHECKOUT defaults to this repository. INTERVAL: $CCTEST_KEEP_INTERVAL_S (default 120). The Python
# with cctest installed: $CCTEST_PYTHON (default .venv/bin/python, as scripts/setup.sh makes it).
set -euo pipefail

once=false
if [ "${1:-}" = --once ]; then once=true; shift; fi
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: scripts/keep-records.sh [--once] OUT PENDING [CHECKOUT]" >&2
  exit 2
fi
repo=$(pwd)
out=$(realpath "$1")
pending=$2
checkout=$(realpath "${3:-$repo}")
python=${CCTEST_PYTHON:-$repo/.venv/bin/python}
interval=${CCTEST_KEEP_INTERVAL_S:-120}
case "$pending" in
  /*|../*|*/../*) echo "PENDING $pending: a path inside this repository, relative to its root" >&2; exit 2 ;;
esac
[ -d "$out" ] || { echo "OUT $1: not a directory" >&2; exit 2; }
[ -x "$python" ] || { echo "$python: missing; run scripts/setup.sh first" >&2; exit 2; }
git -C "$repo" rev-parse --show-toplevel >/dev/null 2>&1 || { echo "$repo: not a git checkout" >&2; exit 2; }

status_of() { "$python" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("status"))' "$1" 2>/dev/null || true; }

keep_once() {
  local made=0 meta run scenario name dest
  for meta in "$out"/*/*/meta.json; do
    [ -f "$meta" ] || continue
    run=$(dirname "$meta"); scenario=$(basename "$(dirname "$run")"); name=$(basename "$run")
    dest=$pending/$scenario/$name
    [ -f "$dest/record.json" ] && continue
    # a guest's files are moved into OUT one by one as it ends: wait until they are all there
    [ -n "$(find "$run" -newermt '-90 seconds' -print -quit)" ] && continue
    [ "$(status_of "$meta")" = ok ] || continue
    if [ ! -f "$run/checks.json" ]; then
      (cd "$checkout" && nice "$python" -m cctest ingest "$run" >/dev/null) || { echo "$name: ingest failed" >&2; continue; }
    fi
    nice "$python" -m cctest record "$run" "$dest" >/dev/null || { echo "$name: record failed" >&2; continue; }
    made=$((made + 1))
  done
  [ "$made" -gt 0 ] || return 0
  local count
  count=$(find "$pending" -name record.json | wc -l)
  git add -- "$pending"
  git commit -q -m "$pending: compact records of finished runs ($count in)" -- "$pending"
  echo "$(date -u +%H:%M:%S) $made new, $count in $pending"
}

if $once; then keep_once; exit; fi
trap 'exit 0' TERM INT
while true; do
  keep_once || echo "$(date -u +%H:%M:%S) this pass failed; the next one tries again" >&2
  sleep "$interval" &
  wait $!
done
