"""Planning is pure: findings and snapshots in, ordered steps out."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.collect.identity import plan_target as fingerprint
from envsync.model.codec import from_data
from envsync.model.environment import Distribution, Interpreter, Snapshot
from envsync.model.findings import Finding, Fix, FlagFix, PinFix, Report, SyncDistFix, SyncFileFix
from envsync.model.vocab import Installer, Only, Prefer, Severity
from envsync.repair.plan import Plan, describe, make_plan
from envsync.repair.steps.flag import FlagStep
from envsync.repair.steps.pin import PinStep
from envsync.repair.steps.sync_dist import SyncDistStep
from envsync.repair.steps.sync_file import SyncFileStep
from tests.figures import held

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"


def snap(host: str, *dists: tuple[str, str, tuple[str, ...]]) -> Snapshot:
    base = from_data(Snapshot, json.loads(SNAPSHOT.read_text()))
    return replace(
        base,
        host=host,
        distributions=tuple(
            Distribution(name=n, display_name=n, version=v, requires=r) for n, v, r in dists
        ),
    )


PIN = PinFix(summary="pin", requirement="app==2.0", dist="app")
FLAG = FlagFix(
    summary="flag",
    flag="--backend",
    value="none",
    gives_up="speed",
    used_when=("--fast",),
)


def finding(
    subject: str = "app", severity: Severity = "fatal", fixes: tuple[Fix, ...] = (PIN, FLAG)
) -> Finding:
    return Finding(
        subject=subject,
        kind="version",
        reference="2.0",
        target="1.0",
        severity=severity,
        reason="r",
        decided_by="import-graph",
        fixes=fixes,
    )


def report(*findings: Finding, command: tuple[str, ...] = ()) -> Report:
    return Report(reference="ref", target="tgt", findings=findings, command=command)


def test_a_pin_brings_the_dependencies_the_new_version_needs() -> None:
    ref = snap(
        "ref",
        ("app", "2.0", ("lib>=2", "extra-only; extra == 'x'")),
        ("lib", "2.0", ("core",)),
        ("core", "3.0", ()),
        ("same", "1.0", ()),
    )
    tgt = snap("tgt", ("app", "1.0", ()), ("lib", "1.0", ()), ("same", "1.0", ()))
    plan = make_plan(report(finding()), ref, tgt, prefer="fix")
    (step,) = plan.steps
    assert step.kind == "pin"
    assert step.requirements == ("app==2.0", "lib==2.0", "core==3.0")
    assert step.dists == ("app", "lib", "core")


def test_a_local_build_is_never_replaced_as_a_side_effect() -> None:
    ref = snap("ref", ("app", "2.0", ("torch",)), ("torch", "2.11.0", ()))
    tgt = snap("tgt", ("app", "1.0", ()), ("torch", "2.11.0+cu130", ()))
    plan = make_plan(report(finding()), ref, tgt, prefer="fix")
    assert isinstance(plan.steps[0], PinStep)
    assert plan.steps[0].requirements == ("app==2.0",)
    assert any("torch: 2.11.0+cu130 on the target is a custom build" in s for s in plan.skipped)


@pytest.mark.parametrize(
    ("prefer", "command", "kind"),
    [
        ("fix", (), "pin"),
        ("workaround", (), "flag"),
        ("auto", (), "flag"),
        ("auto", ("--fast",), "pin"),
        ("workaround", ("--fast",), "flag"),
    ],
)
def test_prefer_chooses_between_the_fix_and_the_workaround(
    prefer: Prefer, command: tuple[str, ...], kind: str
) -> None:
    ref = snap("ref", ("app", "2.0", ()))
    tgt = snap("tgt", ("app", "1.0", ()))
    plan = make_plan(report(finding(), command=command), ref, tgt, prefer=prefer)
    assert [s.kind for s in plan.steps] == [kind]
    if kind == "flag":
        assert plan.flags == {"--backend": "none"}


@pytest.mark.parametrize(
    ("only", "kept"), [("fatal", ["a"]), ("risky", ["a", "b"]), ("all", ["a", "b", "c", "d"])]
)
def test_only_chooses_the_severities(only: Only, kept: list[str]) -> None:
    names: dict[str, Severity] = {"a": "fatal", "b": "risky", "c": "degraded", "d": "benign"}
    ref = snap("ref", *((n, "2.0", ()) for n in names))
    tgt = snap("tgt", *((n, "1.0", ()) for n in names))
    findings = [
        finding(n, s, (replace(PIN, dist=n, requirement=f"{n}==2.0"),)) for n, s in names.items()
    ]
    plan = make_plan(report(*findings), ref, tgt, prefer="fix", only=only)
    assert all(isinstance(s, (PinStep, SyncDistStep)) for s in plan.steps)
    assert [s.dists[0] for s in plan.steps if isinstance(s, (PinStep, SyncDistStep))] == kept


def test_fingerprint_follows_what_a_plan_depends_on() -> None:
    tgt = snap("tgt", ("app", "1.0", ()))
    assert fingerprint(tgt) == fingerprint(replace(tgt, collected_at="later", duration_s=9.0))
    assert fingerprint(tgt) != fingerprint(snap("tgt", ("app", "1.1", ())))
    assert fingerprint(tgt) != fingerprint(replace(tgt, service_flags={"--backend": "none"}))


def test_the_reference_files_serve_only_the_same_interpreter_and_platform() -> None:
    ref = snap("ref", ("app", "2.0", ()))
    tgt = snap("tgt", ("app", "1.0", ()))
    same = make_plan(report(finding()), ref, tgt, prefer="fix").steps[0]
    assert isinstance(same, PinStep) and isinstance(tgt.interpreter, Interpreter)
    assert (same.fallback, same.no_fallback) == (True, None)
    newer = replace(tgt, interpreter=replace(tgt.interpreter, version="3.12.1", abi_tag="cp312"))
    step = make_plan(report(finding()), ref, newer, prefer="fix").steps[0]
    assert isinstance(step, PinStep)
    assert step.fallback is False
    assert (
        step.no_fallback
        == "the reference runs Python 3.11 cp311 linux_x86_64, the target 3.12 cp312 linux_x86_64"
    )


def test_a_plan_that_needs_the_reference_files_says_so_before_anything_runs() -> None:
    sync = SyncFileFix(summary="copy", dist="sglang", path="sglang/x.py")
    copy = SyncDistFix(summary="copy", dist="app")
    patched = replace(finding("sglang/x.py", fixes=(sync,)), kind="file")
    findings = (patched, finding(fixes=(copy,)))
    for source in ("lock", "snapshot", "requirements"):
        ref = replace(snap("ref", ("app", "2.0", ())), source=source)
        plan = make_plan(report(*findings), ref, snap("tgt", ("app", "1.0", ())))
        assert plan.steps == ()
        assert plan.skipped == (
            f"sglang/x.py: sync-file needs the reference's files: the reference is a {source} "
            "file, not a live host with installed files",
            f"app: sync-dist needs the reference's files: the reference is a {source} "
            "file, not a live host with installed files",
        )
    # from a lock, a pin still runs; only its copy fallback is off, and the plan says why
    ref = replace(snap("ref", ("app", "2.0", ())), source="lock")
    step = make_plan(report(finding()), ref, snap("tgt", ("app", "1.0", ())), prefer="fix").steps[0]
    assert isinstance(step, PinStep)
    assert (step.kind, step.fallback) == ("pin", False)
    assert step.no_fallback and "lock file" in step.no_fallback


def test_a_custom_build_on_the_target_is_never_pinned_over() -> None:
    ref = snap("ref", ("app", "2.0", ()))
    for custom in (
        Distribution(name="app", display_name="app", version="1.0+cu130"),
        Distribution(
            name="app",
            display_name="app",
            version="1.0",
            direct_url={"url": "file:///src/app", "dir_info": {"editable": True}},
        ),
    ):
        tgt = replace(snap("tgt"), distributions=(custom,))
        plan = make_plan(report(finding()), ref, tgt, prefer="fix")
        assert plan.steps == ()
        assert "custom build" in plan.skipped[0]
    # a wheel file installed by path is an ordinary version: it may be pinned
    archive = Distribution(
        name="app",
        display_name="app",
        version="1.0",
        direct_url={"url": "file:///w/app-1.0-py3-none-any.whl", "archive_info": {}},
    )
    tgt = replace(snap("tgt"), distributions=(archive,))
    assert make_plan(report(finding()), ref, tgt, prefer="fix").steps[0].kind == "pin"


def test_a_plan_for_a_host_behind_exec_says_a_restart_discards_it() -> None:
    ref = snap("ref", ("app", "2.0", ()))
    tgt = snap("tgt", ("app", "1.0", ()))
    plan = make_plan(report(finding()), ref, tgt, prefer="fix")
    prefix = ("kubectl", "exec", "-i", "-n", "inference", "pod/sglang 0", "--")
    text = describe(plan, exec_prefix=prefix)
    assert text.endswith(
        "  note: tgt is reached through `kubectl exec -i -n inference 'pod/sglang 0' --`: "
        "these changes are made inside the running container (or pod), and restarting it "
        "from its image discards them. The lasting fix is a new image: bake in `envsync lock "
        "tgt` of the repaired container and the pins above.\n"
    )
    assert "note:" not in describe(plan)  # not for a host of its own
    assert "note:" not in describe(replace(plan, steps=()), exec_prefix=prefix)  # nothing to do


def file_finding(
    path: str, severity: Severity, dist: str = "app", ref: str | None = "a"
) -> Finding:
    return Finding(
        subject=path,
        kind="file",
        reference=ref,
        target="b",
        severity=severity,
        reason="r",
        decided_by="import-graph",
        fixes=(SyncFileFix(summary="copy", dist=dist, path=path),),
    )


def test_a_patch_set_moves_whole_and_only_narrows_what_starts_a_step() -> None:
    ref = snap("ref", ("app", "1.0", ()), ("other", "1.0", ()))
    tgt = snap("tgt", ("app", "1.0", ()), ("other", "1.0", ()))
    findings = report(
        file_finding("app/server.py", "risky"),
        file_finding("app/worker.py", "benign"),
        file_finding("app/gone.py", "benign", ref=None),
        file_finding("other/x.py", "benign", dist="other"),
    )
    plan = make_plan(findings, ref, tgt, only="risky")
    (step,) = plan.steps
    assert isinstance(step, SyncFileStep)
    assert step.dist == "app"
    assert step.files == ("app/server.py", "app/worker.py")
    assert step.remove == ("app/gone.py",)
    assert step.summary == (
        "copy 2 file(s) and remove 1 file(s) of app from the reference (backed up first; "
        "includes 2 benign file(s) that --only risky would leave: app's patched files move "
        "together)"
    )
    # The other package's patch set has nothing at or above --only: it stays.
    assert plan.skipped == ("other/x.py: benign (--only risky)",)


@pytest.mark.parametrize(
    ("pip", "uv", "named", "expected"),
    [
        ("/t/pip/__init__.py", "/usr/bin/uv", None, ("pip", None)),
        (None, "/usr/bin/uv", None, ("uv", "/usr/bin/uv")),
        ("/t/pip/__init__.py", "/usr/bin/uv", "uv", ("uv", "/usr/bin/uv")),
        (None, None, "uv", ("uv", "uv")),
        (None, None, "pip", ("pip", None)),
        (
            None,
            None,
            None,
            ("", "the target's Python has no pip, and uv is not on the host's PATH"),
        ),
    ],
)
def test_the_installer_is_what_the_target_has(
    pip: str | None, uv: str | None, named: Installer | None, expected: tuple[str, str | None]
) -> None:
    from envsync.model.environment import Installers
    from envsync.repair.steps.pin import choose_installer

    tgt = replace(snap("tgt"), installers=Installers(pip=pip, uv=uv))
    assert choose_installer(tgt, named) == expected


def test_with_no_installer_a_pin_copies_from_a_matching_reference_or_the_plan_refuses() -> None:
    from envsync.errors import PlanError
    from envsync.model.environment import Installers

    ref = snap("ref", ("app", "2.0", ()))
    tgt = replace(snap("tgt", ("app", "1.0", ())), installers=Installers())
    (step,) = make_plan(report(finding(fixes=(PIN,))), ref, tgt).steps
    assert step.kind == "sync-dist"
    assert step.dists == ("app",)
    assert "no pip" in step.summary
    assert isinstance(ref.interpreter, Interpreter)
    other = replace(ref, interpreter=replace(ref.interpreter, version="3.12.1", abi_tag="cp312"))
    with pytest.raises(PlanError) as caught:
        make_plan(report(finding(fixes=(PIN,))), other, tgt)
    assert "nothing was changed" in str(caught.value)
    assert "-m ensurepip" in str(caught.value)
    uv = replace(tgt, installers=Installers(uv="/opt/uv"))
    (step,) = make_plan(report(finding(fixes=(PIN,))), other, uv).steps
    assert isinstance(step, PinStep)
    assert (step.kind, step.installer) == ("pin", "uv")  # the program: found at apply time


def test_a_saved_plan_round_trips_each_kind_of_step(tmp_path: Path) -> None:
    from envsync.repair.plan import dumps_plan, load_plan
    from envsync.repair.steps.flag import FlagStep
    from envsync.repair.steps.pin import PinStep
    from envsync.repair.steps.sync_dist import SyncDistStep
    from envsync.repair.steps.sync_file import SyncFileStep

    ref = snap("ref", ("app", "2.0", ()), ("lib", "2.0", ()))
    tgt = snap("tgt", ("app", "1.0", ()), ("lib", "1.0", ()))
    findings = (
        finding(fixes=(PIN,)),
        finding("lib", fixes=(SyncDistFix(summary="copy", dist="lib"),)),
        file_finding("app/server.py", "fatal"),
        finding("other", fixes=(FLAG,)),
    )
    plan = make_plan(report(*findings), ref, tgt)
    assert [type(s) for s in plan.steps] == [PinStep, SyncDistStep, SyncFileStep, FlagStep]
    path = tmp_path / "plan.json"
    path.write_text(dumps_plan(plan))
    saved = json.loads(path.read_text())
    # each step holds only its own kind's fields
    assert set(saved["steps"][3]) == {"kind", "summary", "findings", "flag", "value", "gives_up"}
    assert load_plan(path) == plan


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda steps: steps[0].update(requirements="app==2.0"),
            r"plan.steps\[0\].requirements: expected a list, got str",
        ),
        (
            lambda steps: steps[2].update(kind="copy"),
            r"plan.steps\[2\].kind: expected one of 'pin', 'sync-dist', 'sync-file', 'flag', "
            "got 'copy'",
        ),
        (lambda steps: steps[1].pop("kind"), r"plan.steps\[1\]: missing key 'kind'"),
        (
            lambda steps: steps[3].update(requirements=["x==1"]),
            r"plan.steps\[3\]: unknown key 'requirements'",
        ),
    ],
)
def test_a_bad_saved_step_names_its_dotted_path(
    tmp_path: Path, change: Callable[[list[dict[str, object]]], object], message: str
) -> None:
    from envsync.errors import InputError
    from envsync.repair.plan import dumps_plan, load_plan

    ref = snap("ref", ("app", "2.0", ()), ("lib", "2.0", ()))
    tgt = snap("tgt", ("app", "1.0", ()), ("lib", "1.0", ()))
    findings = (
        finding(fixes=(PIN,)),
        finding("lib", fixes=(SyncDistFix(summary="copy", dist="lib"),)),
        file_finding("app/server.py", "fatal"),
        finding("other", fixes=(FLAG,)),
    )
    data = json.loads(dumps_plan(make_plan(report(*findings), ref, tgt)))
    change(data["steps"])
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message):
        load_plan(path)


def test_a_plan_of_an_older_schema_is_refused_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from envsync.cli import main

    old = {
        "schema_version": 1,
        "reference": "ref",
        "target": "local",
        "target_fingerprint": "0" * 64,
        "prefer": "auto",
        "only": "risky",
        "steps": [{"kind": "pin", "summary": "pin", "findings": ["app"], "requirements": []}],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(old))
    assert main(["repair", "--plan", str(path), "--apply"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{path}: a plan of schema_version 1, saved by an older envsync" in err
    assert "Tip: make the plan again with `envsync repair -o FILE`" in err


def _flag_plan() -> tuple[dict, Snapshot]:
    from envsync.repair.plan import dumps_plan

    ref = snap("ref", ("app", "2.0", ()))
    tgt = snap("tgt", ("app", "1.0", ()))
    plan = make_plan(report(finding("other", fixes=(FLAG,))), ref, tgt)
    return json.loads(dumps_plan(plan)), tgt


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"/usr/bin/python3": "/tmp/evil"}, "its flags set '/usr/bin/python3': not a --flag"),
        ({"{python}": "/bin/sh"}, "its flags set '{python}': not a --flag"),
        ({"-m": "evil"}, "its flags set '-m': not a --flag"),
        ({"--model-path": "/tmp/other"}, "is not a plain word"),
        ({"--grammar-backend": "$(touch /tmp/x)"}, "is not a plain word"),
        ({"--grammar-backend": "%h"}, "is not a plain word"),
        ({"--grammar-backend": "`id`"}, "is not a plain word"),
        ({"--grammar-backend": "none --x"}, "is not a plain word"),
    ],
)
def test_a_saved_plans_flags_are_refused_when_they_are_no_flag(
    tmp_path: Path, flags: dict[str, str], message: str
) -> None:
    """A mapping whose key is the interpreter made `repair --plan FILE --apply` (and every
    later deploy) start another program as the service."""
    from envsync.errors import InputError
    from envsync.repair.plan import load_plan

    data, _ = _flag_plan()
    data["flags"] = flags
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="refusing the plan: .*" + re.escape(message)) as e:
        load_plan(path)
    assert "\n" not in str(e.value)
    held("10 a saved plan's flags validated")


def test_a_flag_step_that_is_no_flag_is_refused(tmp_path: Path) -> None:
    from envsync.errors import InputError
    from envsync.repair.plan import load_plan

    data, _ = _flag_plan()
    data["steps"][0]["flag"] = "/usr/bin/python3"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"step 1 \(flag\) sets '/usr/bin/python3': not a --flag"):
        load_plan(path)
    held("10 a saved plan's flags validated")


def test_a_saved_plan_sets_only_the_entrypoints_flags_and_only_by_its_steps() -> None:
    from envsync.repair.plan import flags_problems

    data, _ = _flag_plan()
    plan = from_data(Plan, data, "plan")
    known = {FLAG.flag, "--model-path", "--tool-call-parser"}
    assert flags_problems(plan, {}, known) == []
    # a flag the entrypoint does not define
    assert flags_problems(plan, {}, {"--model-path"})
    # an entry of service.json no step sets and the target does not keep
    sneaky = replace(plan, flags={**plan.flags, "--tool-call-parser": "qwen"})
    (problem,) = flags_problems(sneaky, {}, known)
    assert "service.json would change without a step of the plan" in problem
    assert flags_problems(sneaky, {"--tool-call-parser": "qwen"}, known) == []  # kept already
    held("10 a saved plan's flags validated", 2)


def test_what_a_plan_keeps_in_service_json_is_printed() -> None:
    data, _ = _flag_plan()
    plan = from_data(Plan, data, "plan")
    plan = replace(plan, flags={**plan.flags, "--tool-call-parser": "qwen"}, command=())
    text = describe(plan)
    assert f"service.json on tgt keeps the flags: {FLAG.flag} {FLAG.value}, " in text
    assert "--tool-call-parser qwen" in text
    held("10 a saved plan's flags validated")


def test_repair_checks_a_saved_plans_flags_against_the_entrypoint() -> None:
    """The flags the entrypoint defines are the rule packs' (--grammar-backend ...) and
    those of the service's command; any other is refused before anything is applied."""
    from envsync.errors import InputError
    from envsync.repair.run import _check_flags
    from envsync.runner import Runners
    from envsync.sources.inventory import Inventory, ServiceSpec
    from envsync.sources.session import Session

    data, tgt = _flag_plan()
    service = ServiceSpec(command=("{python}", "-m", "sglang.launch_server", "--model-path", "/m"))
    with Session(inventory=Inventory(path=None, service=service), runners=Runners()) as session:
        ok = replace(from_data(Plan, data, "plan"), flags={"--model-path": "m2"})
        flag = ok.steps[0]
        assert isinstance(flag, FlagStep)
        ok = replace(ok, steps=(replace(flag, flag="--model-path", value="m2"),))
        _check_flags(session, ok, tgt, "plan.json")  # the command's own flag
        grammar = replace(
            ok, flags={"--grammar-backend": "none"},
            steps=(replace(flag, flag="--grammar-backend", value="none"),),
        )  # fmt: skip
        _check_flags(session, grammar, tgt, "plan.json")  # a rule pack's flag
        evil = replace(
            ok, flags={"--enable-evil": "yes"},
            steps=(replace(flag, flag="--enable-evil", value="yes"),),
        )  # fmt: skip
        with pytest.raises(
            InputError,
            match=r"plan.json: refusing the plan: .*'--enable-evil': not a flag the service's entrypoint defines",
        ):
            _check_flags(session, evil, tgt, "plan.json")
    held("10 a saved plan's flags validated")
