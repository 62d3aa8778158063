#!/usr/bin/env bash
# All set-up on a fresh machine: Debian packages the tests use (PostgreSQL server, Chromium),
# torch's CPU wheel first (a looser pin would pull a multi-GB CUDA build), then ipu-tune.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ "${#need[@]}" -gt 0 ] && [ "${1:-}" != "--no-system" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "setup: missing Debian packages ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
  fi
fi

python -m pip install -q torch==2.13.0
python -m pip install -q -e '.[test]'
# optimum-graphcore 0.7.1's wheel, unpacked by nobody: the tests read IPUConfig's fields from its
# source (it imports poptorch and pins an old transformers, so it is never installed here).
python -m pip download -q --no-deps optimum-graphcore==0.7.1 -d .cache/optimum-graphcore
