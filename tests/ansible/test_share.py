"""Facts shared across hosts through `--engine ansible` and envsync's own SSH runner: real
sshd on loopback, real ansible-core, each host with a cache folder of its own (its python
is a script that sets it), so that hosts share facts only through envsync."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envsync.ansible.engine import AnsibleEngine
from envsync.runner import Runners
from envsync.sources.inventory import HostSpec, Inventory
from envsync.sources.session import Session
from tests.collect.test_share import OPTIONS, _parsed, _venv, _verdict
from tests.sshd import SSHD, available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (Path(sys.executable).parent / "ansible-playbook").exists(),
        reason="ansible-core is not installed (pip install -e '.[dev]')",
    ),
]


def test_a_fleet_through_ansible_and_ssh_parses_each_file_once(
    tmp_path: Path, wheel_cache: Path
) -> None:
    why = available()
    if why:
        pytest.skip(why)
    image = _venv(tmp_path / "image", wheel_cache)
    servers = [SSHD(tmp_path / "sshd", name=f"sshd{i}").start() for i in range(4)]
    try:
        known = tmp_path / "known_hosts"
        known.write_text("".join(s.host_key_line() for s in servers))
        hosts = {}
        for i, server in enumerate(servers):
            python = tmp_path / f"python{i}"
            python.write_text(
                f'#!/bin/sh\nXDG_CACHE_HOME={tmp_path / f"cache{i}"} exec "{image}" "$@"\n'
            )
            python.chmod(0o755)
            hosts[f"n{i}"] = HostSpec(
                name=f"n{i}",
                python=str(python),
                ssh=server.target,
                identity=str(server.client_key),
                known_hosts=str(known),
                trust="fleet",  # one image, one owner: the facts each parsed are shared
            )
        inventory = Inventory(path=None, hosts=hosts)
        engine = AnsibleEngine(inventory=inventory, forks=3)
        with Session(inventory=inventory, runners=Runners(), probe=OPTIONS, engine=engine) as s:
            through = s.collect_all([(f"n{i}", None) for i in range(3)])
        parsed = [_parsed(snap) for snap in through]
        assert sorted(parsed)[:2] == [0, 0] and max(parsed) > 20  # the first wave's host only
        # a fourth host, over envsync's own SSH runner: given what the others sent
        with Session(inventory=inventory, runners=Runners(), probe=OPTIONS) as s:
            fourth = s.collect_one("n3")
        assert _parsed(fourth) == 0
        assert _verdict(fourth) == _verdict(through[0])
    finally:
        for server in servers:
            server.stop()
