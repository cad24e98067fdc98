#!/usr/bin/env bash
# envsync quick start: install envsync into .venv, build the built-in example (two local
# venvs, ct129 and ct200, from real wheels), and run envsync on them. What each step prints
# is also kept in reports/quickstart/STEP.txt: the docs' tutorial shows those files.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,docs]' >.venv/install.log 2>&1 \
    || { cat .venv/install.log; echo "quickstart: installing envsync failed (log above)" >&2; exit 1; }
# --runtime: a shared venv with torch (CPU), transformers, ... that both hosts see, so the
# demo server imports the real xgrammar and soundfile (built once, then cached).
.venv/bin/python examples/build_hosts.py --runtime examples/.hosts/runtime

export ENVSYNC_INVENTORY=examples/envsync.toml
envsync() { .venv/bin/envsync "$@"; }
mkdir -p reports/quickstart
# keep STEP COMMAND...: run it, its output (stdout and stderr) shown and kept; its exit code.
keep() {
    local step=$1
    shift
    printf '$ %s\n' "$*" >"reports/quickstart/$step.txt"
    "$@" 2>&1 | tee -a "reports/quickstart/$step.txt"
    return "${PIPESTATUS[0]}"
}

echo "== envsync lock ct129 -o reports/ct129.lock      (record the known-good host)"
keep lock envsync lock ct129 -o reports/ct129.lock
echo
echo "== envsync lock --format pylock ct129 -o reports/pylock.ct129.toml      (the same host as a PEP 751 lock uv installs)"
keep pylock envsync lock --format pylock ct129 -o reports/pylock.ct129.toml
echo
echo "== envsync diff ct129 ct200      (which differences break ct200's startup, and the fixes)"
keep diff envsync diff ct129 ct200 || [ $? -eq 1 ]   # exit 1: drift found, as expected here
echo
echo "== envsync check --lock reports/ct129.lock ct200      (the CI gate; exit 1 = blocked)"
keep check envsync check --lock reports/ct129.lock ct200 --markdown reports/check.md --junit reports/check.xml \
    --format json -o reports/check.json || [ $? -eq 1 ]
echo
echo "== envsync deploy ct129      (the reference: starts, answers, generates)"
keep deploy-ct129 envsync deploy ct129 --deadline 120
echo
echo "== envsync deploy ct200      (fails fast, with the cause and the next command)"
keep deploy-ct200 envsync deploy ct200 --deadline 120 || [ $? -eq 5 ]   # exit 5: smoke test failed
echo
echo "== what the story's user did next: pip install soundfile on ct200 by hand, deploy again"
examples/.hosts/ct200/bin/python -m pip install -q --disable-pip-version-check soundfile==0.13.1
keep deploy-ct200-again envsync deploy ct200 --deadline 120 || [ $? -eq 5 ]   # now the xgrammar cause, after "model load"
echo
echo "== envsync repair      (the plan; nothing changes yet)"
keep repair envsync repair || [ $? -eq 1 ]   # exit 1: steps pending
echo
echo "== envsync repair --apply      (backup, sync the patched files, --grammar-backend none; deploy; smoke test)"
keep repair-apply envsync repair --apply --deadline 120
echo
echo "== envsync diff ct129 ct200      (what is left: the xgrammar the flag avoids)"
keep diff-after envsync diff ct129 ct200 -q || [ $? -eq 1 ]
echo
echo "== back to the story for the next run: rollback, stop, uninstall soundfile"
keep rollback envsync rollback ct200
envsync stop ct129
envsync stop ct200
examples/.hosts/ct200/bin/python -m pip uninstall -q -y soundfile
echo
echo "reports: reports/ct129.lock reports/pylock.ct129.toml reports/check.md reports/check.xml reports/check.json"
