#!/usr/bin/env bash
# The fleet view of the built-in example: ct129 against three targets (ct200, ct201, ct202)
# in classes of identical hosts, as a table, Markdown, JSON and one self-contained HTML
# page, plus a screenshot of the page in headless Chromium. Everything it writes is under
# reports/ (ignored by git: the clone stays clean); the docs' fleet page shows the page and
# its screenshot when they are there at build time.
# Run examples/quickstart.sh once first (it installs .venv and builds the shared runtime).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python examples/build_hosts.py --fleet --runtime examples/.hosts/runtime

export ENVSYNC_INVENTORY=examples/envsync.toml
mkdir -p reports
fleet() { .venv/bin/envsync -q diff ct129 ct200 ct201 ct202 "$@" || [ $? -eq 1 ]; }  # 1: drift
fleet
fleet --format markdown -o reports/fleet.md
fleet --format json -o reports/fleet.json
fleet --format html -o reports/fleet.html
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1500,1000 \
    --user-data-dir="$(mktemp -d)" \
    --screenshot=reports/fleet.png "file://$PWD/reports/fleet.html#open=fatal" 2>/dev/null
echo "reports: reports/fleet.html reports/fleet.png reports/fleet.md reports/fleet.json"
