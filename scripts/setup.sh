#!/usr/bin/env bash
# Sets up everything stackrace needs on Debian 12: system packages, the Python venv,
# and every stack from stacks.toml (via `stackrace install`). Safe to run again: each
# step is skipped when its inputs have not changed since it last succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp_dir=.stackrace/setup
mkdir -p "$stamp_dir"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

# step NAME INPUT_FILES... -- runs the command after -- unless the inputs' hash is unchanged
step() {
  local name=$1; shift
  local inputs=()
  while [ "$1" != "--" ]; do inputs+=("$1"); shift; done; shift
  local hash; hash=$( { cat "${inputs[@]}" 2>/dev/null || true; } | sha256sum | cut -c1-16)
  if [ -f "$stamp_dir/$name" ] && [ "$(cat "$stamp_dir/$name")" = "$hash" ]; then return 0; fi
  echo "== setup: $name"
  "$@"
  echo "$hash" > "$stamp_dir/$name"
}

apt_base() {
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # shellcheck disable=SC2046
  $SUDO apt-get install -y -qq --no-install-recommends $(grep -v '^#' scripts/apt-base.txt) >/dev/null
}

venv() {
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  # cluster: Ray, for `--cluster` and its tests (docs/cluster.md); ~8 s, ~240 MB
  # -c: the versions the suite last passed with (scripts/constraints.txt says why)
  .venv/bin/pip install -q -c scripts/constraints.txt -e '.[test,cluster]'
}

stacks() {
  # apt packages, pip packages and builds that the stacks in stacks.toml declare
  if [ -f stacks.toml ] && .venv/bin/stackrace install --help >/dev/null 2>&1; then
    .venv/bin/stackrace install --all
  fi
}

step apt-base scripts/apt-base.txt -- apt_base
step venv pyproject.toml scripts/constraints.txt setup.py src/stackrace/engine/_cycle.c src/stackrace/engine/_frame.h src/stackrace/engine/_tls.h src/stackrace/engine/_h2.h -- venv
step stacks stacks.toml pyproject.toml $(find apps -type f -not -path '*/node_modules/*' -not -path '*/bin/*' 2>/dev/null | sort) -- stacks
