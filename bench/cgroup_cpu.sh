#!/usr/bin/env bash
# The CPU-seconds a command and everything it starts used (daemons it does not wait for
# included: Ray's, a MariaDB), from a cpuacct cgroup (v1) of its own; as root.
#   bash bench/cgroup_cpu.sh .venv/bin/pytest -q tests/cluster
# Run two at once (two test lanes) to see each lane's share of the machine; the suite's
# own per-test figure (tests/conftest.py, bench/suite_times.py) counts only what pytest
# waited for. Figures: bench/README.md "The test suite's own time".
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: bash bench/cgroup_cpu.sh COMMAND [ARGS...]" >&2; exit 2; }
root=/sys/fs/cgroup/cpuacct
[ -w "$root" ] || { echo "bench/cgroup_cpu.sh: no writable cpuacct cgroup at $root (cgroup v1, root)" >&2; exit 2; }
cg="$root/stackrace-cpu-$$"
mkdir "$cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
started=$SECONDS
rc=0
(echo "$BASHPID" > "$cg/cgroup.procs"; exec "$@") || rc=$?
ns=$(cat "$cg/cpuacct.usage")
wall=$((SECONDS - started))
awk -v ns="$ns" -v wall="$wall" 'BEGIN { cpu = ns / 1e9; printf "%.1f CPU-s in %d s (%.2f of a core)\n", cpu, wall, (wall > 0 ? cpu / wall : 0) }' >&2
exit "$rc"
