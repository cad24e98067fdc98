"""The service command: one module reads entrypoints and flags and builds what a host runs."""

from __future__ import annotations

import pytest

from envsync.classify.launched import entrypoint
from envsync.model.launch import (
    effective_command,
    launch_of,
    parse_flags,
    with_flag,
    with_flags,
)
from envsync.sources.inventory import HostSpec, ServiceSpec

SERVICE = ServiceSpec(
    command=("{python}", "-m", "sglang.launch_server", "--port", "{port}", "--tp", "2"),
    port=30001,
    base_dir="/etc/envsync",
)
HOST = HostSpec(name="ct200", python="/opt/venv/bin/python")


@pytest.mark.parametrize(
    ("command", "module"),
    [
        (("python", "-m", "pkg.mod"), "pkg.mod"),
        (("python", "-mpkg.mod", "--x"), "pkg.mod"),
        (("python", "--m", "x"), None),
        (("python", "serve.py"), None),
        ((), None),
    ],
)
def test_entrypoint_of_a_command(command: tuple[str, ...], module: str | None) -> None:
    launch = launch_of(command)
    assert (launch.target if launch.shape == "module" else None) == module


def test_the_inventory_entrypoint_wins_over_the_command() -> None:
    assert entrypoint(SERVICE).root == "sglang.launch_server"
    assert entrypoint(SERVICE).shown == "-m sglang.launch_server"
    named = entrypoint(ServiceSpec(command=SERVICE.command, entrypoint="other.mod"))
    assert (named.root, named.shown) == ("other.mod", "other.mod")
    none = entrypoint(None)
    assert none.root is None and none.unreadable and "no [service] command" in none.unreadable


def test_flags_are_parsed_last_one_winning() -> None:
    flags = parse_flags(["x", "--a", "1", "--b=2", "--c", "--a", "3", "--", "--d"])
    assert flags == {"--a": "3", "--b": "2", "--c": "true", "--d": "true"}


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (("x", "--g", "xgrammar"), ("x", "--g", "none")),
        (("x", "--g=xgrammar"), ("x", "--g=none")),
        (("x",), ("x", "--g", "none")),
        (("x", "--g", "--other"), ("x", "--g", "--other", "--g", "none")),
    ],
)
def test_a_flag_is_replaced_in_place_else_appended(
    command: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    assert with_flag(command, "--g", "none") == expected


def test_flags_apply_once_whatever_they_were() -> None:
    command = with_flags(("x",), {"--g": "none", "--h": "1"})
    assert (
        with_flags(command, {"--g": "none", "--h": "1"})
        == command
        == ("x", "--g", "none", "--h", "1")
    )
    assert with_flags(command, None) == command


def test_the_effective_command_fills_placeholders_and_applies_the_kept_flags() -> None:
    command = effective_command(SERVICE, HOST, {"--grammar-backend": "none", "--tp": "4"})
    assert command == (
        "/opt/venv/bin/python",
        "-m",
        "sglang.launch_server",
        "--port",
        "30001",
        "--tp",
        "4",
        "--grammar-backend",
        "none",
    )
    # a lock or snapshot file stands for the target: no interpreter to fill in
    assert effective_command(SERVICE, None, None)[0] == "{python}"
    script = ServiceSpec(command=("{python}", "{inventory_dir}/serve.py"), base_dir="/etc/e")
    assert effective_command(script, HOST, None) == ("/opt/venv/bin/python", "/etc/e/serve.py")
