#!/usr/bin/env bash
# envsync quick start: install envsync into .venv, build the built-in example (two local
# venvs, ct129 and ct200, from real wheels), and run envsync on them.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' >.venv/install.log 2>&1 \
    || { cat .venv/install.log; echo "quickstart: installing envsync failed (log above)" >&2; exit 1; }
.venv/bin/python examples/build_hosts.py

export ENVSYNC_INVENTORY=examples/envsync.toml
envsync() { .venv/bin/envsync "$@"; }

echo "== envsync snapshot ct129 ct200 -o reports/example-snapshots.json"
envsync snapshot ct129 ct200 -o reports/example-snapshots.json
echo "== envsync lock ct129 -o reports/ct129.lock   (the known-good reference)"
envsync lock ct129 -o reports/ct129.lock
envsync lock ct200 -o reports/ct200.lock -q
echo "== the two locks, side by side (packages and patched files)"
diff <(grep -A1 '^name = ' reports/ct129.lock; grep -A3 '^patched' reports/ct129.lock) \
     <(grep -A1 '^name = ' reports/ct200.lock; grep -A3 '^patched' reports/ct200.lock) || true
