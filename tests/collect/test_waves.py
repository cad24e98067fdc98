"""The waves in which several hosts are collected (collect.waves): a host is given what the
hosts before it parsed, so that each file is parsed once in all; nothing waits for nothing."""

from __future__ import annotations

import pytest

from envsync.collect import ProbeOptions, share, waves
from envsync.sources.inventory import HostSpec

pytestmark = pytest.mark.quick

OPTIONS = ProbeOptions(roots=("svc.main",), internal=("svc",))


def _hosts(*pythons: str) -> list[tuple[HostSpec, ProbeOptions] | None]:
    return [(HostSpec(name=f"h{n}", python=p, trust="t"), OPTIONS) for n, p in enumerate(pythons)]


@pytest.fixture
def known(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The hosts envsync knows (and, when "command" is in it, the command's packs)."""
    names: set[str] = set()
    monkeypatch.setattr(share, "known_host", lambda host, cache_dir: host.name in names)
    monkeypatch.setattr(share, "known_command", lambda *a: "command" in names)
    return names


def test_a_new_command_one_host_first_then_the_rest_by_image(known: set[str]) -> None:
    # h0 a reference, h1..h3 nodes of one image: h0 first, then h1, then h2 and h3
    assert waves(_hosts("/r/python", "/n/python", "/n/python", "/n/python")) == [[0], [1], [2, 3]]


def test_the_lead_s_own_image_needs_no_second_wave(known: set[str]) -> None:
    assert waves(_hosts("/n/python", "/n/python", "/n/python")) == [[0], [1, 2]]


def test_a_known_command_still_takes_one_node_of_an_image_first(known: set[str]) -> None:
    known.update({"command", "h0"})
    # h0 known (warm): it waits for no one; of the new nodes, one first
    assert waves(_hosts("/r/python", "/n/python", "/n/python")) == [[0, 1], [2]]


def test_hosts_of_different_images_go_at_once(known: set[str]) -> None:
    known.add("command")
    assert waves(_hosts("/a/python", "/b/python", "/c/python")) == [[0, 1, 2]]


def test_no_cache_and_files_wait_for_no_one(known: set[str]) -> None:
    none = ProbeOptions(roots=OPTIONS.roots, internal=OPTIONS.internal, cache_dir="")
    asked = [None, (HostSpec(name="x", python="/n/python"), none), *_hosts("/n/python")]
    assert waves(asked) == [[0, 1, 2]]


def test_hosts_of_no_trust_wait_for_no_one(known: set[str]) -> None:
    """Nothing would be given them: each host's facts decide its own verdicts only."""
    asked = [(HostSpec(name=f"h{n}", python="/n/python"), OPTIONS) for n in range(3)]
    assert waves(asked) == [[0, 1, 2]]
