"""Each vocabulary is defined once; every order derives from it, and host-side copies match."""

from __future__ import annotations

import inspect

from envsync import vocab
from envsync.apply import agent
from envsync.collect import probe
from envsync.findings import Report


def test_ranks_derive_from_the_one_order() -> None:
    assert list(vocab.SEVERITY_RANK) == list(vocab.SEVERITIES)
    assert list(vocab.CONTEXT_RANK) == list(vocab.CONTEXTS)
    assert set(vocab.RUNS) < set(vocab.CONTEXTS)
    assert all(vocab.CONTEXT_RANK[r] < vocab.CONTEXT_RANK["function"] for r in vocab.RUNS)
    # an import under TYPE_CHECKING never runs, even inside a function
    assert vocab.weaker("function", "typing") == vocab.weaker("typing", "function") == "typing"
    assert list(Report(reference="a", target="b").summary) == list(vocab.SEVERITIES)


def test_the_probe_orders_contexts_as_envsync_does() -> None:
    # the probe runs on hosts without envsync: it keeps a copy, tied here
    assert probe.CONTEXTS == vocab.CONTEXTS
    assert probe.deeper("function", "typing") == probe.deeper("typing", "function") == "typing"


def test_the_probe_and_the_agent_key_a_host_environment_alike(tmp_path: object) -> None:
    # backups (agent) and kept service flags (probe) are found under the same key
    assert inspect.getsource(probe.env_key) == inspect.getsource(agent.env_key)
    for prefix in ("/opt/venv", "/usr", str(tmp_path)):
        assert probe.env_key(prefix) == agent.env_key(prefix)
    assert len(probe.env_key("/opt/venv")) == 12


def test_each_kind_of_fix_and_step_is_one_class_tagged_with_its_word() -> None:
    from typing import get_args

    from envsync.codec import tag_of
    from envsync.findings import Fix
    from envsync.plan import Step

    for union in (Fix, Step):
        tags = [tag_of(cls) for cls in get_args(union)]
        assert tags == [(kind,) for kind in get_args(vocab.FixKind)]
