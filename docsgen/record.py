"""`python -m docsgen.record FOLDER [--record]`: what a run of examples/quickstart.sh took
and fetched, written to FOLDER/run.json; with `--record`, also kept in
docs/generated/quickstart.json (as the first run or a later one) and the README's figures
written from it (docsgen/quickstart.py holds the figures, docsgen/figures.py the README's).
Above both, so that neither imports the other."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from docsgen.figures import readme_with_performance
from docsgen.quickstart import QUICKSTART, ROOT, duration, load, make_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--built-runtime", type=int, default=0)
    parser.add_argument("--runtime-bytes", type=int, default=0)
    parser.add_argument("--wheel-bytes", type=int, default=0)
    args = parser.parse_args(argv)
    run = make_run(args.folder, bool(args.built_runtime), args.runtime_bytes, args.wheel_bytes)
    (args.folder / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    ms = run["ms"]
    print(
        f"quickstart: took {duration(ms['total'])}, the envsync steps {duration(ms['story'])} "
        f"({args.folder / 'run.json'})"
    )
    if args.record:
        recorded = load(ROOT)
        kind = "first" if run["first"] else "later"
        recorded[kind] = run
        (ROOT / QUICKSTART).write_text(json.dumps(recorded, indent=2) + "\n")
        readme = ROOT / "README.md"
        readme.write_text(readme_with_performance(readme.read_text(), ROOT))
        print(f"quickstart: recorded as the {kind} run in {QUICKSTART}; the README written from it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
