"""Benchmark: `envsync snapshot` of an editable SGLang checkout against the wheel install.

Both venvs hold the real SGLang 0.5.11 (about 2,800 files), watched by envsync: one from
the wheel (files hashed against RECORD), one as a git checkout of the same files
installed in editable mode by uv, with one local patch (files found through the editable
finder, hashed, and the checkout's git index read and compared with the working tree).
Each snapshot runs as a fresh process, interleaved; the medians and the ratio are printed.

    .venv/bin/python -m benchmarks.editable [--runs 9]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.snapshot import interleaved_medians
from tests.classify.test_sglang_wheels import fetch
from tests.repair.test_source_repair import checkout_from_wheel
from tests.source_trees import backend_wheels, editable_install, uv_install, uv_venv

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache" / "editable"
WHEELS = REPO / "examples" / ".cache" / "wheels"


def build() -> dict[str, Path]:
    wheel_venv, editable_venv = CACHE / "wheel-venv", CACHE / "editable-venv"
    stamp = CACHE / ".bench-ready"
    if not stamp.exists():
        print(f"building {CACHE} (once) ...", file=sys.stderr)
        wheel = fetch(WHEELS, "sglang==0.5.11")
        uv_install(uv_venv(wheel_venv), "--no-index", str(wheel))
        checkout = CACHE / "checkout"
        checkout_from_wheel(wheel, checkout)
        server_args = checkout / "python" / "sglang" / "srt" / "server_args.py"
        server_args.write_text(server_args.read_text() + "\n# a local patch\n")
        editable_install(
            uv_venv(editable_venv), checkout / "python", backend_wheels(WHEELS), by="uv"
        )
        stamp.write_text("ok\n")
    return {"wheel": wheel_venv / "bin" / "python", "editable": editable_venv / "bin" / "python"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    pythons = build()
    envsync = str(Path(sys.executable).parent / "envsync")
    with tempfile.TemporaryDirectory() as tmp:
        inventory = Path(tmp) / "envsync.toml"
        inventory.write_text(
            "".join(
                f'[hosts.{k}]\npython = "{v}"\nwatch = ["sglang"]\n' for k, v in pythons.items()
            )
        )
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")  # the warm runs' own cache
        base = [envsync, "--inventory", str(inventory), "-q", "snapshot"]
        commands = {
            f"{host}{' (warm cache)' if warm else ''}": [
                *base,
                host,
                *([] if warm else ["--no-cache"]),
            ]
            for host in pythons
            for warm in (False, True)
        }
        counts = {}
        for host in pythons:
            snap = json.loads(subprocess.run([*base, host], check=True, capture_output=True).stdout)
            (sglang,) = [d for d in snap["distributions"] if d["name"] == "sglang"]
            counts[host] = (len(sglang["files"]), (sglang.get("source") or {}).get("mode", "wheel"))
        medians = interleaved_medians(commands, args.runs)
    for host, (files, mode) in counts.items():
        print(f"{host}: sglang 0.5.11 as {mode}, {files} files hashed")
    print(f"runs: {args.runs}, interleaved; median wall time per snapshot")
    for name, value in medians.items():
        print(f"  {name:24s} {value * 1000:8.1f} ms")
    cold = medians["editable"] / medians["wheel"]
    warm = medians["editable (warm cache)"] / medians["wheel (warm cache)"]
    print(f"ratio editable/wheel:              {cold:.2f}  (no cache)")
    print(f"ratio editable/wheel (warm cache): {warm:.2f}  (hashes reused by stat)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
