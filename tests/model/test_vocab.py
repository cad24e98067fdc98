"""Each vocabulary is defined once; every order derives from it, the host side's included."""

from __future__ import annotations

import ast
import inspect
import os
from pathlib import Path
from typing import get_args

from envsync.hostside import shared
from envsync.hostside.agent import paths as agent_paths
from envsync.hostside.agent import service as agent_service
from envsync.hostside.facts.state import service_state
from envsync.model import vocab
from envsync.model.findings import Report


def test_ranks_derive_from_the_one_order() -> None:
    assert list(vocab.SEVERITY_RANK) == list(vocab.SEVERITIES)
    assert list(vocab.CONTEXT_RANK) == list(vocab.CONTEXTS)
    assert set(vocab.RUNS) < set(vocab.CONTEXTS)
    assert all(vocab.CONTEXT_RANK[r] < vocab.CONTEXT_RANK["function"] for r in vocab.RUNS)
    # an import under TYPE_CHECKING never runs, even inside a function
    assert vocab.weaker("function", "typing") == vocab.weaker("typing", "function") == "typing"
    assert list(Report(reference="a", target="b").summary) == list(vocab.SEVERITIES)


def test_envsync_uses_the_import_contexts_the_probe_records() -> None:
    # one definition, on the host side: envsync's vocabulary is that very object
    assert vocab.CONTEXTS is shared.CONTEXTS
    assert vocab.RUNS is shared.RUNS
    assert vocab.weaker is shared.weaker
    # the codec checks graph edges against the same values
    assert get_args(vocab.Context) == shared.CONTEXTS
    # the type checkers' spelling of them (shared.Context) names the same values
    tree = ast.parse(Path(shared.__file__).read_text())
    (alias,) = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["Context"]
    ]
    assert isinstance(alias, ast.Subscript)
    assert tuple(ast.literal_eval(alias.slice)) == shared.CONTEXTS


def test_the_probe_and_the_agent_find_a_host_environment_state_alike(tmp_path: Path) -> None:
    # backups (agent) and kept service flags (probe) are in the same folder, inside the
    # environment: both take their paths from the one StatePaths, nobody else spells it
    for prefix in ("/opt/venv", "/usr", str(tmp_path)):
        state = shared.StatePaths(prefix)
        assert state.root == os.path.join(os.path.realpath(prefix), ".envsync")
        assert state.service.startswith(state.root + "/") and state.lock.startswith(state.root)
    assert len(shared.env_key("/opt/venv")) == 12
    assert isinstance(agent_paths.STATE, shared.StatePaths)
    hostside = Path(shared.__file__).parent
    spelled = [
        p.relative_to(hostside).as_posix()
        for p in hostside.rglob("*.py")
        if "hexdigest()[:12]" in p.read_text() or '".envsync"' in p.read_text()
    ]
    assert spelled == ["shared.py"]
    assert "StatePaths(" in inspect.getsource(service_state)
    assert "STATE.service" in inspect.getsource(agent_service.read_service)


def test_each_kind_of_fix_and_step_is_one_class_tagged_with_its_word() -> None:
    from typing import get_args

    from envsync.model.codec import tag_of
    from envsync.model.findings import Fix
    from envsync.repair.steps import Step

    for union in (Fix, Step):
        tags = [tag_of(cls) for cls in get_args(union)]
        assert tags == [(kind,) for kind in get_args(vocab.FixKind)]
