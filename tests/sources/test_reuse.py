"""One collection per host per command: each stage reuses what the command collected.

The example's real ct129 and ct200 (with the shared runtime, for the service), each probe
run counted through a real LocalRunner: a diff, check --lock, a repair --apply whose
service then crashes (the crash traced against the reference the repair collected), a
watch round, and a canary rollout collect each host once, and again only after an apply
(or, for a canary host, once more under its lock).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from envsync.collect import identity
from envsync.compare import targets as compare
from envsync.repair.canary import rollout
from envsync.repair.run import RepairOptions, repair, rollback_host
from envsync.report.watch import WatchOptions, watch_once
from envsync.runner import CommandResult, Runner, Runners
from envsync.service.host import stop_host
from envsync.sources.inventory import HostSpec, load_inventory
from envsync.sources.locks.locking import lock_host
from envsync.sources.session import Session
from envsync.sources.states import StateStore
from tests.helpers import example_inventory


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Path:
    """The example's hosts with the shared runtime (tests/helpers.py example_inventory)."""
    return example_inventory(tmp_path_factory.mktemp("reuse"), wheel_cache)


class Counted:
    """A real runner whose probe runs are counted: (host, "graph" or "plain")."""

    def __init__(self, runner: Runner, name: str, counts: Counter[tuple[str, str]]) -> None:
        self._runner, self._name, self._counts = runner, name, counts

    def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float) -> Any:
        head = next((a for a in argv if a.startswith('{"program":"collect"')), None)
        if head is not None:
            options = json.loads(argv[list(argv).index(head) - 1])
            self._counts[(self._name, "graph" if options.get("roots") else "plain")] += 1
        result: CommandResult = self._runner.run(argv, input=input, timeout=timeout)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)


class CountingRunners(Runners):
    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[tuple[str, str]] = Counter()
        self._counted: dict[str, Counted] = {}

    def __call__(self, spec: HostSpec) -> Runner:
        if spec.name not in self._counted:
            self._counted[spec.name] = Counted(super().__call__(spec), spec.name, self.counts)
        return self._counted[spec.name]


@pytest.fixture
def command(hosts: Path, tmp_path: Path) -> Iterator[Any]:
    """A new command's session each time it is called (as the CLI makes one)."""
    made: list[Session] = []
    store = StateStore(root=tmp_path / "states")

    def new() -> Session:
        session = Session(
            inventory=load_inventory(str(hosts), {}), runners=CountingRunners(), states=store
        )
        made.append(session)
        return session

    yield new
    for session in made:
        session.close()


def _counts(session: Session) -> dict[tuple[str, str], int]:
    assert isinstance(session.runners, CountingRunners)
    return dict(session.runners.counts)


@pytest.mark.slow
def test_diff_and_check_collect_each_host_once(command: Any, tmp_path: Path) -> None:
    session = command()
    compare.diff(session, "ct129", "ct200")
    assert _counts(session) == {("ct129", "graph"): 1, ("ct200", "graph"): 1}

    lock = tmp_path / "env.lock"
    session = command()
    lock.write_text(lock_host(session, "ct129").text)
    assert _counts(session) == {("ct129", "plain"): 1}  # its state recorded from it too

    session = command()
    before = identity.COMPUTED["environment"]
    result = compare.check(session, lock, ["ct200"], fail_on="fatal")
    assert result.blocking
    assert _counts(session) == {("ct200", "graph"): 1}
    assert identity.COMPUTED["environment"] - before == 1


@pytest.mark.slow
def test_a_crash_after_an_apply_is_traced_against_the_reference_already_collected(
    command: Any, tmp_path: Path
) -> None:
    """repair --apply of the soundfile pin alone: the service then crashes on xgrammar,
    and the cause is traced against ct129 as the repair collected it; ct200 is collected
    again after the apply (and its service's state read before the deploy)."""
    session = command()
    saved = tmp_path / "plan.json"
    repair(session, RepairOptions(prefer="fix", save=saved))
    plan = json.loads(saved.read_text())
    plan["steps"] = [s for s in plan["steps"] if "soundfile==0.13.1" in s.get("requirements", [])]
    assert len(plan["steps"]) == 1
    saved.write_text(json.dumps(plan))
    session = command()
    try:
        done = repair(session, RepairOptions(plan=saved, apply=True, deadline=120))
        assert done.service is not None and done.service.verdict.kind == "crashed"
        diagnosis = done.service.diagnosis
        assert diagnosis is not None and diagnosis.cause is not None
        assert diagnosis.cause.finding is not None
        assert diagnosis.cause.finding.subject == "xgrammar"
        assert any("as collected earlier in this command" in n for n in diagnosis.notes)
        assert _counts(session) == {
            ("ct129", "graph"): 1,
            ("ct200", "graph"): 2,  # before the apply, and after it for the diagnosis
            ("ct200", "plain"): 1,  # the service's state, read after the apply
        }
    finally:
        stop_host(session, "ct200")
        rollback_host(command(), "ct200")


@pytest.mark.slow
def test_each_watch_round_collects_each_host_once(command: Any, tmp_path: Path) -> None:
    lock = tmp_path / "env.lock"
    lock.write_text(lock_host(command(), "ct129").text)
    session = command()
    options = WatchOptions(hosts=("ct200",), lock=str(lock))
    before = Counter(identity.COMPUTED)
    watch_once(session, options)
    assert _counts(session) == {("ct200", "graph"): 1}
    computed = {n: identity.COMPUTED[n] - before[n] for n in ("compared", "environment")}
    assert computed == {"compared": 1, "environment": 1}  # the state's, and the status's
    watch_once(session, options)  # a new round looks anew
    assert _counts(session) == {("ct200", "graph"): 2}


@pytest.mark.slow
def test_a_canary_collects_the_reference_once_and_each_host_under_its_lock(
    command: Any,
) -> None:
    session = command()
    try:
        done = rollout(session, RepairOptions(apply=True, deadline=120, batch=("1",)), ["ct200"])
        assert [r.outcome for r in done.results] == ["changed"], done.results
        counts = _counts(session)
        assert counts[("ct129", "graph")] == 1
        # planned from one collection, collected again under its lock, and after the apply
        # its service's state and its recorded state (one collection without a graph)
        assert counts[("ct200", "graph")] == 2
        assert counts[("ct200", "plain")] == 2
    finally:
        stop_host(session, "ct200")
        rollback_host(command(), "ct200")
