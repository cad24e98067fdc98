"""The reference's graph is decoded module by module, when classification looks (a diff
reads a few statements of it); a module that does not decode cannot break the command."""

from __future__ import annotations

import json
import sys

import pytest

from envsync.collect import ProbeOptions, parse_probe_output, probe_argv, probe_source
from envsync.hostside.shared import text_digest
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec


def probe_output() -> bytes:
    spec = HostSpec(name="here", python=sys.executable)
    options = ProbeOptions(roots=("envsync.model.vocab",), internal=("envsync",), cache_dir="")
    result = LocalRunner("here").run(probe_argv(spec, options), input=probe_source(), timeout=120)
    assert result.returncode == 0, result.stderr_tail()
    return result.stdout


def test_lazy_modules_decode_to_what_the_eager_decoder_gives() -> None:
    out = probe_output()
    eager = parse_probe_output("here", out).startup
    lazy = parse_probe_output("here", out, lazy_graph=True).startup
    assert eager is not None and lazy is not None
    assert type(lazy.modules).__name__ == "LazyModules"
    assert len(lazy.modules) == len(eager.modules) > 1
    assert dict(lazy.modules) == dict(eager.modules)


@pytest.mark.parametrize("form", ["two lines", "one document"])
def test_a_module_that_does_not_decode_reads_as_unreadable(form: str) -> None:
    head, text, *parts = probe_output().rstrip(b"\n").split(b"\n")
    data, modules = json.loads(head), json.loads(text)
    tail = b"".join(p + b"\n" for p in parts)  # the distributions, the native facts
    modules["envsync.model.vocab"]["imports"] = "not a list"
    if form == "two lines":  # as the probe sends it: the modules with their digest
        text = json.dumps(modules).encode()
        data["startup"]["modules_digest"] = text_digest(text)
        out = json.dumps(data).encode() + b"\n" + text + b"\n" + tail
    else:
        for extra in ("modules_digest", "modules_sent"):
            del data["startup"][extra]
        data["startup"]["modules"] = modules
        listed = data.pop("parts")
        for name, part in zip(listed, parts, strict=True):
            data[name] = json.loads(part)
        out = json.dumps(data).encode()
    lazy = parse_probe_output("here", out, lazy_graph=True).startup
    assert lazy is not None
    broken = lazy.modules["envsync.model.vocab"]
    assert broken.kind == "error" and "envsync.model.vocab" in (broken.error or "")
