"""Benchmark: what a change costs, on the example as the quick start builds it.

Each step changes ct200 (a copy of it, so that the quick start's hosts are left alone),
then times `envsync diff ct129 ct200` once, against `pip check` of ct200 timed in the same
round; the verdicts of each step are compared with a `--no-cache` diff of the same state
in a cache folder of its own (any difference fails the benchmark):

  edit        one line appended to sglang/srt/utils/common.py (a file startup imports)
  revert      the same file put back
  install     a real `pip install --no-deps` of another xgrammar (0.1.32, startup imports
              it), then the one before put back
  check       a warm `check --lock` of ct200 against the lock of ct129
  caches      the size of envsync's caches after N diffs, each after one edited file,
              against the size of one graph's modules

    .venv/bin/python -m benchmarks.change [--runs 3] [--changes 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.all import run_measured  # noqa: E402
from tests.helpers import fetch  # noqa: E402

HOSTS = REPO / "examples" / ".hosts"
EDITED = "sglang/srt/utils/common.py"


def _site(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def _inventory(folder: Path, ct200: Path) -> Path:
    text = (REPO / "examples" / "envsync.toml").read_text()
    text = text.replace('".hosts/ct200/', f'"{ct200}/').replace('".hosts/', f'"{HOSTS}/')
    path = folder / "envsync.toml"
    path.write_text(text)
    return path


def _report(argv: list[str], env: dict[str, str]) -> list[object]:
    out = subprocess.run(
        [*argv, "--format", "json"], env=env, capture_output=True, check=False, text=True
    )
    if out.returncode not in (0, 1):
        raise SystemExit(f"{argv}: exit {out.returncode}: {out.stderr[-400:]}")
    data = json.loads(out.stdout)
    return sorted(
        json.dumps([f["severity"], f["kind"], f["subject"]], sort_keys=True)
        for f in data["findings"]
    )


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--no-compare", action="store_true", help="skip the --no-cache diffs")
    args = parser.parse_args()
    envsync = REPO / ".venv" / "bin" / "envsync"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ct200 = folder / "ct200"
        shutil.copytree(HOSTS / "ct200", ct200, symlinks=True)
        python = ct200 / "bin" / "python"
        # the copy's own paths: its scripts and pyvenv.cfg name the original
        cfg = ct200 / "pyvenv.cfg"
        cfg.write_text(cfg.read_text().replace(str(HOSTS / "ct200"), str(ct200)))
        inv = _inventory(folder, ct200)
        env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache")}
        cold_env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cold")}
        base = [str(envsync), "--inventory", str(inv), "-q"]
        diff = [*base, "diff", "ct129", "ct200"]
        pip_check = [str(python), "-m", "pip", "--disable-pip-version-check", "check"]
        lock = folder / "ct129.lock"
        subprocess.run([*base, "lock", "ct129", "-o", str(lock)], env=env, check=True)
        edited = _site(python) / EDITED
        original = edited.read_bytes()
        wheels = REPO / "examples" / ".cache" / "wheels"
        new_xgrammar = fetch(wheels, "xgrammar==0.1.32")
        old_xgrammar = fetch(wheels, "xgrammar==0.1.10")

        def pip_install(wheel: Path) -> None:
            subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-deps",
                    "--no-index",
                    "--disable-pip-version-check",
                    str(wheel),
                ],
                check=True,
                capture_output=True,
            )

        steps: dict[str, list[float]] = {}
        peaks: dict[str, int] = {}
        mismatches: list[str] = []

        def step(name: str, argv: list[str], compare: bool = True) -> None:
            wall, peak = run_measured(argv, env)
            check, _ = run_measured(pip_check, env)
            steps.setdefault(name, []).append(wall / check)
            peaks[name] = max(peaks.get(name, 0), peak)
            if compare and not args.no_compare:
                warm = _report(argv, env)
                shutil.rmtree(folder / "cold", ignore_errors=True)
                cold = _report([*argv[:3], "diff", "--no-cache", *argv[-2:]], cold_env)
                if warm != cold:
                    mismatches.append(f"{name}: {warm} != {cold}")

        run_measured(diff, env)  # the first contact: both hosts cold
        run_measured(diff, env)
        cache = folder / "cache" / "envsync"
        one = _size(cache)  # the caches of one diff: both hosts' facts and graphs, once
        for i in range(args.runs):
            step("warm diff", diff, compare=i == 0)
            edited.write_bytes(original + f"\n# edited {time.time_ns()}\n".encode())
            time.sleep(3)  # past the racy window: the edit is cached as any file is
            step("diff after one edited file", diff, compare=i == 0)
            edited.write_bytes(original)
            time.sleep(3)
            step("diff after putting it back", diff, compare=False)
            pip_install(new_xgrammar)
            step("diff after pip install of another xgrammar", diff, compare=i == 0)
            pip_install(old_xgrammar)
            step("diff after putting xgrammar back", diff, compare=False)
            check = [*base, "check", "--lock", str(lock), "ct200"]
            run_measured(check, env)  # the state changed with the step before: warm it
            step("warm check --lock", check, False)
        before = _size(cache)
        for i in range(args.changes):
            edited.write_bytes(original + f"\n# change {i}\n".encode())
            os.utime(edited, ns=(1_600_000_000_000_000_000 + i, 1_600_000_000_000_000_000 + i))
            run_measured(diff, env)
        edited.write_bytes(original)
        after = _size(cache)
    print(f"runs: {args.runs}; each step's wall time over pip check's in the same round")
    for name, ratios in steps.items():
        print(f"  {name:44s} {statistics.median(ratios):6.2f}x  {peaks[name] / 1024:6.1f} MiB")
    print(
        f"caches: {one / 2**20:.1f} MB after the first diff, {before / 2**20:.1f} MB after the "
        f"steps, {after / 2**20:.1f} MB after {args.changes} more diffs each after one change "
        f"({after / one:.2f}x the first diff's; target <= 2x)"
    )
    for line in mismatches:
        print("VERDICTS DIFFER:", line)
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
