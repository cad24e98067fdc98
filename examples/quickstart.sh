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
# --runtime: a shared venv with torch (CPU), transformers, ... that both hosts see, so the
# demo server imports the real xgrammar and soundfile (built once, then cached).
.venv/bin/python examples/build_hosts.py --runtime examples/.hosts/runtime

export ENVSYNC_INVENTORY=examples/envsync.toml
envsync() { .venv/bin/envsync "$@"; }

echo "== envsync lock ct129 -o reports/ct129.lock      (record the known-good host)"
envsync lock ct129 -o reports/ct129.lock
echo
echo "== envsync lock --format pylock ct129 -o reports/pylock.ct129.toml      (the same host as a PEP 751 lock uv installs)"
envsync lock --format pylock ct129 -o reports/pylock.ct129.toml
echo
echo "== envsync diff ct129 ct200      (which differences break ct200's startup, and the fixes)"
envsync diff ct129 ct200 || [ $? -eq 1 ]   # exit 1: drift found, as expected here
echo
echo "== envsync check --lock reports/ct129.lock ct200      (the CI gate; exit 1 = blocked)"
envsync check --lock reports/ct129.lock ct200 --markdown reports/check.md --junit reports/check.xml \
    --format json -o reports/check.json || [ $? -eq 1 ]
echo
echo "== envsync deploy ct129      (the reference: starts, answers, generates)"
envsync deploy ct129 --deadline 120
echo
echo "== envsync deploy ct200      (fails fast, with the cause and the next command)"
envsync deploy ct200 --deadline 120 || [ $? -eq 5 ]   # exit 5: smoke test failed
echo
echo "== what the story's user did next: pip install soundfile on ct200 by hand, deploy again"
examples/.hosts/ct200/bin/python -m pip install -q --disable-pip-version-check soundfile==0.13.1
envsync deploy ct200 --deadline 120 || [ $? -eq 5 ]   # now the xgrammar cause, after "model load"
echo
echo "== envsync repair      (the plan; nothing changes yet)"
envsync repair || [ $? -eq 1 ]   # exit 1: steps pending
echo
echo "== envsync repair --apply      (backup, sync the patched files, --grammar-backend none; deploy; smoke test)"
envsync repair --apply --deadline 120
echo
echo "== envsync diff ct129 ct200      (what is left: the xgrammar the flag avoids)"
envsync diff ct129 ct200 -q || [ $? -eq 1 ]
echo
echo "== back to the story for the next run: rollback, stop, uninstall soundfile"
envsync rollback ct200
envsync stop ct129
envsync stop ct200
examples/.hosts/ct200/bin/python -m pip uninstall -q -y soundfile
echo
echo "reports: reports/ct129.lock reports/pylock.ct129.toml reports/check.md reports/check.xml reports/check.json"
