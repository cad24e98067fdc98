"""Caches change under a running command: diffs of different hosts side by side on one
envsync cache kept far below what they send (ENVSYNC_CACHE_MB: every answer kept prunes
what the others named), a `cache clear` and a `cache prune --max-size 0` looping beside
them. Each ends with the exit code and the findings of a --no-cache diff, never a
traceback, never a host blamed.

The example's ct129 and ct200 venvs, each behind many host names (a request of its own
per name); the hosts keep their own caches apart (XDG_CACHE_HOME set by an exec prefix, as
remote hosts do), warmed by one diff first, so that the diffs side by side parse nothing
and race on envsync's received folder (and the hosts' facts stores made anew: their ids
removed, their facts kept). A clear of the host side's own copy while its
probe runs is tests/hostside/test_boot.py's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.figures import round_four
from tests.helpers import REPO

pytestmark = pytest.mark.slow

ITEM = "5 diffs side by side on a cache at its cap: the --no-cache verdict"
SIDE_BY_SIDE = 8
CAP_MB = "8"  # one graph of the example is about 20 MB of chunks: nothing stays long
NAMES = re.compile(r"\b(ref|tgt)-\d+\b")


def inventory(tmp_path: Path, example_hosts: Path) -> Path:
    """Hosts ref-N (ct129) and tgt-N (ct200), N = 0 to SIDE_BY_SIDE + 1, with the
    example's service; the hosts' own caches in one folder of their own."""
    text = (REPO / "examples" / "envsync.toml").read_text()
    service = text[text.index("[service]") :].replace("{inventory_dir}", str(REPO / "examples"))
    lines = ['[defaults]\nwatch = ["sglang"]\nenv = ["CUDA_VISIBLE_DEVICES", "SGLANG_*"]\n']
    prefix = json.dumps(["env", f"XDG_CACHE_HOME={tmp_path / 'hosts-cache'}"])
    for n in range(SIDE_BY_SIDE + 2):
        for name, venv in (("ref", "ct129"), ("tgt", "ct200")):
            python = example_hosts / venv / "bin" / "python"
            lines.append(f'[hosts.{name}-{n}]\npython = "{python}"\nexec = {prefix}\n')
    inv = tmp_path / "envsync.toml"
    inv.write_text("\n".join(lines) + "\n" + service)
    return inv


def diff(inv: Path, n: int, out: Path, *options: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "envsync", "--inventory", str(inv), "-q", "diff"]
    argv += [f"ref-{n}", f"tgt-{n}", "--format", "json", "-o", str(out), *options]
    env = {**os.environ, "ENVSYNC_CACHE_MB": CAP_MB}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def verdict(proc: subprocess.Popen[bytes], out: Path) -> tuple[int, str, str]:
    """(exit code, the findings and summary with the hosts' names taken out, stderr)."""
    _, err = proc.communicate(timeout=600)
    found = ""
    if out.is_file():
        data = json.loads(out.read_text())
        found = json.dumps([data["summary"], data["findings"]], sort_keys=True)
    return proc.returncode, NAMES.sub(r"\1", found), err.decode(errors="replace")


def test_diffs_side_by_side_on_a_cache_at_its_cap_give_the_no_cache_verdict(
    tmp_path: Path, example_hosts: Path
) -> None:
    inv = inventory(tmp_path, example_hosts)
    # the hosts' caches warmed by one diff (as a test bed that ran before), and the verdict
    # of a --no-cache diff beside it
    warm = diff(inv, 0, tmp_path / "warm.json")
    truth_run = diff(inv, SIDE_BY_SIDE + 1, tmp_path / "truth.json", "--no-cache")
    truth = verdict(truth_run, tmp_path / "truth.json")
    assert truth[0] == 1 and truth[1], truth[2]  # the example's drift, with findings
    assert verdict(warm, tmp_path / "warm.json")[:2] == truth[:2]

    done = threading.Event()
    changes = [0]

    def clear_and_prune() -> None:  # another envsync on this machine, again and again
        for n in range(10_000):
            if done.wait(0.3):
                return
            action = ["clear"] if n % 2 else ["prune", "--max-size", "0"]
            argv = [sys.executable, "-m", "envsync", "cache", *action]
            subprocess.run(argv, capture_output=True, check=True, timeout=60)
            # the hosts' facts stores made anew, as far as envsync's records can tell (a
            # clear there: the facts themselves kept, so that nothing is parsed again)
            for store in (tmp_path / "hosts-cache").glob("envsync/facts-*/id"):
                store.unlink(missing_ok=True)
            changes[0] += 1

    beside = threading.Thread(target=clear_and_prune)
    beside.start()
    try:
        outs = [tmp_path / f"side-{n}.json" for n in range(1, SIDE_BY_SIDE + 1)]
        procs = [diff(inv, n, out) for n, out in enumerate(outs, 1)]
        results = [verdict(proc, out) for proc, out in zip(procs, outs, strict=True)]
    finally:
        done.set()
        beside.join()
    assert changes[0] >= 2, "the cache was cleared and pruned while the diffs ran"
    for code, found, err in results:
        assert "Traceback" not in err, err
        assert (code, found) == truth[:2], err
        round_four(ITEM)
