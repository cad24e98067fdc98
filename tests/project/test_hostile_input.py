"""Hostile input: every parser of untrusted input, fed generated documents (hypothesis).

Each parser either returns its value or raises an envsync error whose `str()` is one line
and whose exit code is 2 (bad input) or 3 (a host sent it): never another exception, which
the CLI would show as a traceback. Documents are generated three ways: random text, a valid
document with bytes cut, inserted or replaced, and a valid document with one value swapped
for any JSON/TOML value. The CLI is run on some of them to check that nothing is written
to `-o` when it fails. Huge and deeply nested documents are refused by their size.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envsync.errors import EnvsyncError
from envsync.exitcodes import ExitCode
from tests.figures import add

DATA = Path(__file__).parent.parent / "data"
BUDGET = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
SNAPSHOT = (DATA / "snapshots" / "ct129.json").read_text()
LOCK = (DATA / "golden" / "ct129.lock").read_text()
INVENTORY = """\
[defaults]
reference = "ref"
target = "tgt"
watch = ["sglang"]
env = ["CUDA_*"]

[service]
command = ["{python}", "-m", "sglang.launch_server", "--port", "{port}"]
port = 30001
health = "/health"

[hosts.ref]
python = "/opt/venv/bin/python"

[hosts.tgt]
ssh = "root@ct200:22"
python = "/opt/venv/bin/python"
pip_options = ["--index-url", "http://127.0.0.1:9/simple"]
service = { env = { CUDA_VISIBLE_DEVICES = "1" } }
"""
RULES = (Path(__file__).parents[2] / "envsync" / "rules" / "sglang.toml").read_text()
REQUIREMENTS = "xgrammar==0.1.32\nsoundfile==0.13.1\ntorch==2.11.0+cu130\n"
PLAN = json.dumps(
    {
        "schema_version": 1,
        "reference": "ref",
        "target": "tgt",
        "target_fingerprint": "0" * 64,
        "prefer": "fix",
        "only": "risky",
        "steps": [
            {
                "kind": "pin",
                "summary": "pin xgrammar==0.1.32",
                "findings": ["xgrammar"],
                "requirements": ["xgrammar==0.1.32"],
                "dists": ["xgrammar"],
            },
            {
                "kind": "sync-file",
                "summary": "copy 1 file",
                "findings": ["sglang/srt/server_args.py"],
                "files": ["sglang/srt/server_args.py"],
                "dist": "sglang",
            },
        ],
        "command": ["{python}", "-m", "sglang.launch_server"],
        "flags": {},
    }
)
KNOWN_HOSTS = "[127.0.0.1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
NVIDIA_SMI = (DATA / "nvidia-smi" / "ct200-query.csv").read_text()
CRASH_LOG = (DATA / "systemd" / "journal-crash.txt").read_text()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def mutated(text: str) -> st.SearchStrategy[str]:
    """`text` with a slice cut, replaced or duplicated: a truncated or damaged document."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 200)))
        how = draw(st.sampled_from(["cut", "replace", "insert", "truncate", "dup"]))
        if how == "cut":
            return text[:i] + text[j:]
        if how == "truncate":
            return text[:i]
        if how == "dup":
            return text[:j] + text[i:j] + text[j:]
        junk = draw(st.text(max_size=30))
        return text[:i] + junk + (text[j:] if how == "replace" else text[i:])

    return build()


def swapped_json(text: str) -> st.SearchStrategy[str]:
    """A JSON document with one value (at any depth) swapped for any JSON value."""
    doc = json.loads(text)
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node[:3]):
                walk(v, (*path, i))

    walk(doc, ())

    @st.composite
    def build(draw: st.DrawFn) -> str:
        path = draw(st.sampled_from(paths[1:]))
        value = draw(json_values)
        copy = json.loads(text)
        node = copy
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return json.dumps(copy)

    return build()


def swapped_toml(text: str) -> st.SearchStrategy[str]:
    """A TOML document with one value swapped for any TOML-writable value."""
    import tomli_w

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    doc = tomllib.loads(text)
    as_json = json.dumps(doc)
    toml_values = st.recursive(
        st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)
        ),
        max_leaves=8,
    )

    @st.composite
    def build(draw: st.DrawFn) -> str:
        copy = json.loads(as_json)
        node = copy
        while True:
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            if not keys:
                break
            key = draw(st.sampled_from(keys))
            child = node[key]
            if isinstance(child, dict | list) and child and draw(st.booleans()):
                node = child
                continue
            node[key] = draw(toml_values)
            break
        return tomli_w.dumps(copy)

    return build()


def documents(text: str, kind: str) -> st.SearchStrategy[str]:
    swap = swapped_json(text) if kind == "json" else swapped_toml(text)
    return st.one_of(st.text(max_size=300), mutated(text), swap)


def refused_cleanly(parse: Callable[[], object], exits: tuple[int, ...] = (2,)) -> None:
    """`parse()` returns, or raises an envsync error of one line with an allowed exit code."""
    try:
        parse()
    except EnvsyncError as e:
        line = str(e)
        assert "\n" not in line, line
        assert line.strip(), "an empty message"
        assert int(e.exit_code) in exits, (e.exit_code, line)


def with_file(text: str, suffix: str, parse: Callable[[Path], object]) -> Callable[[], object]:
    def run() -> object:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"doc{suffix}"
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
            return parse(path)

    return run


# -- each parser ----------------------------------------------------------------------------


@BUDGET
@given(documents(INVENTORY, "toml"))
def test_inventory_toml(text: str) -> None:
    from envsync.sources.inventory import load_inventory

    add("inputs tried per parser", "inventory TOML")
    refused_cleanly(with_file(text, ".toml", lambda p: load_inventory(str(p), {})))


@BUDGET
@given(documents(LOCK, "toml"))
def test_lock_toml(text: str) -> None:
    from envsync.sources.locks.lockfile import loads_lock

    add("inputs tried per parser", "lock TOML")
    refused_cleanly(lambda: loads_lock(text, "env.lock"))


@BUDGET
@given(documents(SNAPSHOT, "json"))
def test_snapshot_json_as_a_host_sends_it(text: str) -> None:
    from envsync.collect import parse_probe_output

    add("inputs tried per parser", "snapshot JSON (probe output)")
    refused_cleanly(lambda: parse_probe_output("host", text.encode("utf-8", "surrogatepass")), (3,))


@BUDGET
@given(documents(SNAPSHOT, "json"))
def test_snapshot_json_file(text: str) -> None:
    from envsync.sources.snapshot import load_snapshot

    add("inputs tried per parser", "snapshot JSON (file)")
    refused_cleanly(with_file(text, ".json", load_snapshot))


@BUDGET
@given(documents(PLAN, "json"))
def test_saved_plan_json(text: str) -> None:
    from envsync.repair.plan import load_plan

    add("inputs tried per parser", "saved plan JSON")
    refused_cleanly(with_file(text, ".json", load_plan))


@BUDGET
@given(documents(RULES, "toml"))
def test_rule_pack(text: str) -> None:
    from envsync.classify.rules import read_pack

    add("inputs tried per parser", "rule pack TOML")
    refused_cleanly(with_file(text, ".toml", read_pack))


@BUDGET
@given(st.one_of(st.text(max_size=200), mutated(REQUIREMENTS)))
def test_pinned_requirements(text: str) -> None:
    from envsync.sources.requirements import read_requirements

    add("inputs tried per parser", "pinned requirements")
    refused_cleanly(with_file(text, ".txt", read_requirements))


@BUDGET
@given(st.one_of(st.text(max_size=200), mutated(NVIDIA_SMI)))
def test_nvidia_smi_output(text: str) -> None:
    from envsync.hostside.facts import machine as probe

    add("inputs tried per parser", "nvidia-smi output")
    with contextlib.suppress(ValueError):  # the probe makes it "unavailable: ..."
        probe.parse_gpu_csv(text)
    probe.parse_cuda_version(text)


@BUDGET
@given(st.one_of(st.text(max_size=400), mutated(CRASH_LOG)))
def test_service_logs_fed_to_the_crash_matcher(text: str) -> None:
    from envsync.classify import failing_module
    from envsync.service import last_exception

    add("inputs tried per parser", "service logs (crash matcher)")
    exception = last_exception(text)
    if exception is not None:
        assert "\n" not in exception
        failing_module(exception)


@settings(BUDGET, max_examples=60)
@given(st.one_of(st.text(max_size=200), mutated(KNOWN_HOSTS)))
def test_known_hosts_lines(text: str) -> None:
    """A known_hosts file is read before connecting: refused cleanly, or the (closed) port
    refuses the connection; never an exception of paramiko's own."""
    from envsync.runner.ssh import SSHRunner
    from envsync.sources.inventory import HostSpec

    add("inputs tried per parser", "known_hosts lines")
    with tempfile.TemporaryDirectory() as d:
        known = Path(d) / "known_hosts"
        known.write_text(text, encoding="utf-8", errors="surrogatepass")
        spec = HostSpec(name="h", python="python3", ssh="root@127.0.0.1:9", known_hosts=str(known))
        runner = SSHRunner(spec, connect_timeout=2)
        refused_cleanly(runner.connection, (3,))
        runner.close()


# -- the CLI: one line, exit 2, nothing written ------------------------------------------------


@settings(BUDGET, max_examples=40)
@given(documents(SNAPSHOT, "json"))
def test_the_cli_refuses_a_damaged_snapshot_without_writing_output(
    tmp_path: Path, text: str
) -> None:
    from envsync.cli import main

    add("inputs tried per parser", "snapshot JSON (CLI diff)")
    bad = tmp_path / "bad.json"
    bad.write_text(text, encoding="utf-8", errors="surrogatepass")
    out = tmp_path / "report.json"
    out.unlink(missing_ok=True)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = main(["diff", str(bad), str(DATA / "snapshots" / "ct129.json"), "-o", str(out)])
    if code in (ExitCode.OK, ExitCode.DRIFT):
        return  # a mutation that is still a snapshot
    assert code == ExitCode.USAGE, stderr.getvalue()
    lines = stderr.getvalue().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envsync: "), lines
    assert not out.exists()


# -- size limits ------------------------------------------------------------------------------


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_deeply_nested_documents_are_refused_not_crashed(tmp_path: Path) -> None:
    from envsync.collect import parse_probe_output
    from envsync.repair.plan import load_plan
    from envsync.sources.locks.lockfile import loads_lock
    from envsync.sources.snapshot import load_snapshot

    deep = deep_json(100_000)
    cases: list[tuple[str, Callable[[], object], int]] = [
        ("probe output", lambda: parse_probe_output("h", deep.encode()), 3),
        ("snapshot", with_file(deep, ".json", load_snapshot), 2),
        ("plan", with_file(deep, ".json", load_plan), 2),
        ("lock", lambda: loads_lock("a = " + "[" * 100_000 + "]" * 100_000, "env.lock"), 2),
    ]
    for what, parse, code in cases:
        with pytest.raises(EnvsyncError) as e:
            parse()
        assert int(e.value.exit_code) == code, what
        assert "nested" in str(e.value) or "too deep" in str(e.value), (what, str(e.value))
        add("inputs tried per parser", "deeply nested documents")


def test_huge_documents_are_refused_by_their_size(tmp_path: Path) -> None:
    from envsync.collect import parse_probe_output
    from envsync.documents import MAX_DOCUMENT_BYTES
    from envsync.sources.snapshot import load_snapshot

    huge = tmp_path / "huge.json"
    with huge.open("w") as f:
        f.write('{"schema_version": 1, "pad": "')
        f.truncate(MAX_DOCUMENT_BYTES + 10)
    with pytest.raises(EnvsyncError, match="larger than") as e:
        load_snapshot(huge)
    assert e.value.exit_code == ExitCode.USAGE
    with pytest.raises(EnvsyncError, match="larger than") as e:
        parse_probe_output("h", b" " * (MAX_DOCUMENT_BYTES + 1))
    assert e.value.exit_code == ExitCode.COLLECT
    add("inputs tried per parser", "huge documents", 2)


# -- requirements a plan or snapshot would hand an installer ---------------------------------

HOSTILE_REQUIREMENTS = [
    "--target=/somewhere",
    "-e .",
    "--no-build-isolation",
    "/path/to/pkg",
    "./pkg",
    "pkg @ file:///tmp/pkg.whl",
    "pkg @ https://evil.example/pkg.whl",
    "pkg==1.0 --index-url http://evil",
    "pkg==1.0\n-r /etc/shadow",
    "pkg==1.0; python_version > '3'",
    "pkg>=1.0",
    "pkg==1.0 ",
    "pkg==-1",
    "pkg[extra]==1.0",
    "==1.0",
    "-pkg==1.0",
    "pkg==1.0==2.0",
    "pkg===1.0",
    "",
]


@pytest.mark.parametrize("req", HOSTILE_REQUIREMENTS)
def test_a_saved_plan_handing_an_installer_anything_but_name_version_is_refused(
    tmp_path: Path, req: str
) -> None:
    from envsync.repair.plan import PLAN_SCHEMA_VERSION, load_plan

    doc = json.loads(PLAN)
    doc["schema_version"] = PLAN_SCHEMA_VERSION
    doc["steps"][0]["requirements"] = [req]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(EnvsyncError) as e:
        load_plan(path)
    line = str(e.value)
    assert "\n" not in line and e.value.exit_code == ExitCode.USAGE
    assert "refusing the plan: step 1 (pin) hands the installer" in line, line
    add("inputs tried per parser", "plan requirements that are not NAME==VERSION")


@pytest.mark.parametrize("name", ["--target=/x", "../x", "a b", "x\n-r y", ""])
def test_a_saved_plan_naming_a_distribution_that_is_no_name_is_refused(
    tmp_path: Path, name: str
) -> None:
    from envsync.repair.plan import PLAN_SCHEMA_VERSION, load_plan

    doc = json.loads(PLAN)
    doc["schema_version"] = PLAN_SCHEMA_VERSION
    doc["steps"][1]["dist"] = name
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(EnvsyncError, match="names the distribution") as e:
        load_plan(path)
    assert e.value.exit_code == ExitCode.USAGE
    add("inputs tried per parser", "plan distributions that are no name")


def test_name_version_pins_pass() -> None:
    from envsync.repair.steps.names import requirement_problem

    for ok in ("xgrammar==0.1.32", "torch==2.11.0+cu130", "a.b-c_d==1!2.0.post1.dev3", "x==1.0rc1"):
        assert requirement_problem(ok) is None, ok
