"""What the compiler refuses after the parser took it (envsync/hostside/graph/compilable.py),
held to compile() itself: on every interpreter this machine has (pyenv's, the system's,
this one), each shape's SyntaxError (message and line) or none, as that version says."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parents[2]

# Run in each interpreter: every shape parsed, compiled and read by compile_error.
CHILD = r"""
import ast, json, sys
sys.path.insert(0, sys.argv[1])
from envsync.hostside.graph.compilable import compile_error

def nest(n, kind):
    lines, pad = [], ""
    for i in range(n):
        lines.append(pad + {"for": "for i%d in ():" % i, "while": "while 0:",
                            "with": "with a:", "try": "try:"}[kind])
        pad += "    "
    lines.append(pad + "pass")
    if kind == "try":
        for i in reversed(range(n)):
            lines += ["    " * i + "except E:", "    " * i + "    pass"]
    return "\n".join(lines) + "\n"

def handlers(n):
    lines, pad = [], ""
    for _ in range(n):
        lines += [pad + "try:", pad + "    pass", pad + "except E:"]
        pad += "    "
    return "\n".join(lines + [pad + "pass"]) + "\n"

def in_def(src):
    return "def f():\n" + "".join("    " + line + "\n" for line in src.splitlines())

shapes = {
    "return": "x = 1\nreturn x\n",
    "yield": "x = 1\nyield x\n",
    "await": "x = 1\nawait x\n",
    "await-in-sync-def": "def f():\n    x = 1\n    await x\n",
    "await-in-comprehension": "async def f():\n    return [await x for x in y]\n",
    "break": "x = 1\nbreak\n",
    "continue": "if x:\n    continue\n",
    "break-in-loop-else": "for i in x:\n    pass\nelse:\n    break\n",
    "break-in-def-in-loop": "for i in x:\n    def f():\n        break\n",
    "nonlocal": "nonlocal x\n",
    "duplicate-argument": "def f(a, b, a):\n    pass\n",
    "duplicate-lambda-argument": "f = lambda a, a: 1\n",
    "import-star-in-def": "def f():\n    from os import *\n",
    "return-in-class": "class A:\n    return 1\n",
    "yield-in-class": "class A:\n    x = yield 1\n",
    "two-errors": "x = 1\nreturn 1\ndef f(a, a):\n    pass\n",
    "nonlocal-in-class-in-def": "def f():\n    x = 1\n    class A:\n        nonlocal x\n",
    "nonlocal-in-class": "class A:\n    nonlocal x\n",
    "fine": "def f():\n    yield 1\nasync def g():\n    await x\nfor i in x:\n"
    "    try:\n        break\n    finally:\n        pass\n",
    # the words' lines are found as the tokenizer counts lines: a form feed ends none
    "yield-after-form-feeds": "x = 1\n\x0c\ny = 2 \x0c z = 3\nw = (1,\n    (yield))\n",
    "await-after-a-form-feed-in-a-string": "s = 'a\x0cb'\nt = f(1,\n  await x)\n",
    "yield-after-carriage-returns": "x = 1\ry = 2\r\nz = (yield)\r\n",
    "lambda-spread-over-lines": "f = g(1,\n  2,\n  lambda a,\n  a: 1)\n",
    "duplicate-argument-over-lines": "def f(a,\n   b,\n   a):\n    pass\n",
    "yield-in-a-decorator-line": "@d(\n  (yield))\ndef f():\n    pass\n",
    "await-in-a-class-base": "class A(\n  B, await c):\n    pass\n",
    "yield-in-an-except-type": "try:\n    pass\nexcept (\n  yield):\n    pass\n",
    "await-in-a-with-item": "with (\n  await x):\n    pass\n",
    # evaluated where the def, the class or the lambda is made
    "yield-in-a-keyword-only-default": "def f(*, c=(yield)):\n    pass\n",
    "await-in-a-class-keyword": "class A(metaclass=(await m)):\n    pass\n",
    "yield-in-a-lambda-default": "f = lambda x=(yield): 1\n",
    "await-in-a-lambda-keyword-default": "def g():\n    f = lambda *, x=(await y): 1\n",
    "yield-in-a-lambda-body-is-its-own": "def g():\n    f = lambda: (yield)\n",
}
for kind in ("for", "while", "with", "try"):
    for n in (19, 20, 21, 22, 23):
        shapes["%s-%d" % (kind, n)] = nest(n, kind)
        shapes["def-%s-%d" % (kind, n)] = in_def(nest(n, kind))
for n in (9, 10, 11, 19, 20, 21):
    shapes["handlers-%d" % n] = handlers(n)
    shapes["def-handlers-%d" % n] = in_def(handlers(n))

out = {}
for name, src in shapes.items():
    try:
        tree = ast.parse(src)
    except SyntaxError:
        continue  # the parser's own: read as such before this
    try:
        compile(src, "f.py", "exec")
        real = None
    except SyntaxError as e:
        real = [e.msg, e.lineno]
    mine = compile_error(tree, src)
    out[name] = [real, None if mine is None else [mine.msg, mine.lineno]]
print(json.dumps(out))
"""


def _interpreters() -> list[str]:
    """This interpreter and every other CPython 3.8 or newer this machine has."""
    found = {os.path.realpath(sys.executable): sys.executable}
    pattern = os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")
    for path in sorted(glob.glob(pattern)) + sorted(glob.glob("/usr/bin/python3.[0-9]*")):
        if path.endswith("-config") or not os.access(path, os.X_OK):
            continue
        done = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info >= (3, 8))"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.stdout.strip() == "True":
            found.setdefault(os.path.realpath(path), path)
    return sorted(found.values())


@pytest.mark.parametrize("python", _interpreters())
def test_what_the_compiler_refuses_is_found_as_each_version_says(python: str) -> None:
    done = subprocess.run(
        [python, "-c", CHILD, str(ROOT)], capture_output=True, text=True, check=True
    )
    seen = json.loads(done.stdout)
    assert len(seen) >= 60, seen
    wrong = {name: pair for name, pair in seen.items() if pair[0] != pair[1]}
    # what envsync leaves unsaid (never a SyntaxError that is not there): `nonlocal` in a
    # class body at module level raises another message
    unsaid = {name for name, (real, mine) in wrong.items() if real and mine is None}
    assert unsaid <= {"nonlocal-in-class"}, (python, wrong)
    assert not {n: p for n, p in wrong.items() if n not in unsaid}, (python, wrong)
    # the shapes the compiler refuses are the ones that matter: most of them are
    assert sum(1 for real, _ in seen.values() if real) >= 30
