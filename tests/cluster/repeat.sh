#!/usr/bin/env bash
# The cluster tests, N times in a row (default 10), while a CPU burner keeps every core
# busy: a test that passes only on a quiet machine is flaky, and a flaky test refuses
# the whole landing. Prints each run's result (the failing tests and the phase they
# timed out in) and the count.
#
#   bash tests/cluster/repeat.sh [N] [pytest args...]      (as root for the multi-host ones)
#
# The burner is one busy loop per core, at normal priority, started here and killed on
# exit (also on Ctrl-C). Logs: $REPEAT_LOGS (default a new directory under /tmp).
set -u
cd "$(dirname "$0")/../.."
n=${1:-10}
shift || true
logs=${REPEAT_LOGS:-$(mktemp -d /tmp/stackrace-repeat.XXXXXX)}
mkdir -p "$logs"

burners=()
stop_burners() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null; done
  wait "${burners[@]}" 2>/dev/null
}
trap stop_burners EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$(nproc)"); do
  ( while :; do :; done ) &
  burners+=($!)
done
echo "burner: ${#burners[@]} busy loops (pids ${burners[*]}); logs in $logs"

pass=0
fail=0
for i in $(seq "$n"); do
  start=$(date +%s)
  log="$logs/run-$i.log"
  if .venv/bin/pytest -q -p no:cacheprovider tests/cluster "$@" >"$log" 2>&1; then
    pass=$((pass + 1))
    echo "run $i/$n: passed ($(($(date +%s) - start))s) $(tail -1 "$log")"
  else
    fail=$((fail + 1))
    echo "run $i/$n: FAILED ($(($(date +%s) - start))s) $(tail -1 "$log")"
    grep -E "^(FAILED|ERROR) |timed out|failed in phase" "$log" | sort -u | head -20 | sed 's/^/    /'
  fi
done
echo "cluster tests under a CPU burner on $(nproc) cores: $pass passed, $fail failed of $n runs"
[ "$fail" -eq 0 ]
