#!/usr/bin/env bash
# The fleet view of the built-in example: ct129 against three targets (ct200, ct201, ct202)
# in classes of identical hosts, as a table, Markdown, JSON and one self-contained HTML
# page, plus a screenshot of the page in headless Chromium. The page and its screenshot
# are kept in the repository as the docs' sample (docs/assets/fleet.html, fleet.png: the fleet how-to).
# Run examples/quickstart.sh once first (it installs .venv and builds the shared runtime).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python examples/build_hosts.py --fleet --runtime examples/.hosts/runtime

export ENVSYNC_INVENTORY=examples/envsync.toml
fleet() { .venv/bin/envsync -q diff ct129 ct200 ct201 ct202 "$@" || [ $? -eq 1 ]; }  # 1: drift
fleet
fleet --format markdown -o reports/fleet.md
fleet --format json -o reports/fleet.json
fleet --format html -o docs/assets/fleet.html
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1500,1000 \
    --user-data-dir="$(mktemp -d)" \
    --screenshot=docs/assets/fleet.png "file://$PWD/docs/assets/fleet.html#open=fatal" 2>/dev/null
echo "reports: docs/assets/fleet.html docs/assets/fleet.png reports/fleet.md reports/fleet.json"
