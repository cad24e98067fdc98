#!/usr/bin/env bash
# envsync quick start: install envsync into .venv, build the built-in example (two local
# venvs, ct129 and ct200, from real wheels), and run envsync on them. What each step prints
# is also kept in reports/quickstart/STEP.txt (the docs' tutorial shows those files), and
# what the run took and fetched in reports/quickstart/run.json. Everything it writes is
# ignored by git: the clone stays clean.
#
# --record: also write this run's figures into docs/generated/quickstart.json (as the
# first run when it built the runtime, else as a later one) and the README's sentence
# from them, as benchmarks/all.py writes the performance figures.
set -euo pipefail
cd "$(dirname "$0")/.."
record=()
case "${1:-}" in
    --record) record=(--record) ;;
    "") ;;
    *) echo "quickstart: unknown argument ${1} (Tip: the only option is --record)" >&2; exit 2 ;;
esac

mkdir -p reports/quickstart
times=reports/quickstart/times.tsv
: >"$times"
now() { date +%s%N; }
# took NAME START: the milliseconds since START, kept under NAME.
took() { printf '%s\t%s\n' "$1" "$((($(now) - $2) / 1000000))" >>"$times"; }
begin=$(now)
# What the first run fetches: the runtime (torch CPU, transformers, ...) and the hosts' wheels.
[ -f examples/.hosts/runtime/.envsync-example.json ] && had_runtime=1 || had_runtime=0
wheels_before=$(du -sbL examples/.cache/wheels 2>/dev/null | cut -f1 || echo 0)

t=$(now)
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# An editable install: the code is read from the checkout. It is done again only when
# pyproject.toml (what is installed) changed since the last one that succeeded.
installed=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -x .venv/bin/envsync ] || [ "$(cat .venv/.envsync-installed 2>/dev/null)" != "$installed" ]; then
    rm -f .venv/.envsync-installed
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,docs]' >.venv/install.log 2>&1 \
        || { cat .venv/install.log; echo "quickstart: installing envsync failed (log above)" >&2; exit 1; }
    echo "$installed" >.venv/.envsync-installed
fi
took install "$t"
# --runtime: a shared venv with torch (CPU), transformers, ... that both hosts see, so the
# demo server imports the real xgrammar and soundfile (built once, then cached).
t=$(now)
.venv/bin/python examples/build_hosts.py --runtime examples/.hosts/runtime
took hosts "$t"

export ENVSYNC_INVENTORY=examples/envsync.toml
envsync() { .venv/bin/envsync "$@"; }
# keep STEP COMMAND...: run it, its output (stdout and stderr) shown and kept; its exit
# code; how long it took.
keep() {
    local step=$1 start status
    shift
    start=$(now)
    printf '$ %s\n' "$*" >"reports/quickstart/$step.txt"
    set +e
    "$@" 2>&1 | tee -a "reports/quickstart/$step.txt"
    status=${PIPESTATUS[0]}
    set -e
    took "$step" "$start"
    return "$status"
}
story=$(now)

echo "== envsync lock ct129 -o reports/ct129.lock      (record the known-good host)"
keep lock envsync lock ct129 -o reports/ct129.lock
echo
echo "== envsync lock --format pylock ct129 -o reports/pylock.ct129.toml      (the same host as a PEP 751 lock uv installs)"
keep pylock envsync lock --format pylock ct129 -o reports/pylock.ct129.toml
echo
echo "== envsync diff ct129 ct200      (which differences break ct200's startup, and the fixes)"
keep diff envsync diff ct129 ct200 || [ $? -eq 1 ]   # exit 1: drift found, as expected here
echo
echo "== envsync check --lock lockfiles/ct129.lock ct200      (the CI gate, against the committed lock; exit 1 = blocked)"
keep check envsync check --lock lockfiles/ct129.lock ct200 --markdown reports/check.md --junit reports/check.xml \
    --format json -o reports/check.json || [ $? -eq 1 ]
echo
echo "== envsync deploy ct129      (the reference: starts, answers, generates)"
keep deploy-ct129 envsync deploy ct129 --deadline 120
echo
echo "== envsync deploy ct200      (fails fast, with the cause and the next command)"
keep deploy-ct200 envsync deploy ct200 --deadline 120 || [ $? -eq 5 ]   # exit 5: smoke test failed
echo
echo "== what the story's user did next: pip install soundfile on ct200 by hand, deploy again"
# --no-deps: soundfile's own needs (cffi, numpy) come from the shared runtime, and the hosts
# were installed without pip's resolver, whose check would only list what they leave out.
t=$(now)
examples/.hosts/ct200/bin/python -m pip install -q --disable-pip-version-check --no-deps soundfile==0.13.1
took pip-install "$t"
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
t=$(now)
envsync stop ct129
envsync stop ct200
examples/.hosts/ct200/bin/python -m pip uninstall -q -y soundfile
took put-back "$t"
took story "$story"
took total "$begin"
echo
wheels_after=$(du -sbL examples/.cache/wheels 2>/dev/null | cut -f1 || echo 0)
runtime_bytes=$(du -sbL examples/.hosts/runtime 2>/dev/null | cut -f1 || echo 0)
.venv/bin/python -m docsgen.record reports/quickstart "${record[@]}" \
    --built-runtime "$((1 - had_runtime))" --runtime-bytes "$runtime_bytes" \
    --wheel-bytes "$((wheels_after - wheels_before))"
echo "reports: reports/ct129.lock reports/pylock.ct129.toml reports/check.md reports/check.xml reports/check.json reports/quickstart/"
