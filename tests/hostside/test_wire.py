"""The wire is typed once: every agent operation has a request and a reply type in
hostside/protocol.py, and both sides are written against them (read from the tree)."""

from __future__ import annotations

import ast
from pathlib import Path

from envsync.hostside import protocol
from envsync.hostside.agent import ops
from envsync.runner import agent as client

PROTOCOL = Path(protocol.__file__)
CLIENT = Path(client.__file__)
AGENT = Path(ops.__file__).parent
OPERATIONS = {
    name: value
    for name, value in vars(protocol).items()
    if name.isupper() and isinstance(value, str) and value in protocol.OPS
}


def type_name(constant: str) -> str:
    """REMOVE_DIST -> RemoveDist: the stem of an operation's types."""
    return "".join(part.capitalize() for part in constant.split("_"))


def checking_names(path: Path) -> set[str]:
    """The classes and aliases defined under `if TYPE_CHECKING:` in a module."""
    out: set[str] = set()
    for block in ast.parse(path.read_text()).body:
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING":
            for node in block.body:
                if isinstance(node, ast.ClassDef):
                    out.add(node.name)
                elif isinstance(node, ast.Assign):
                    out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def test_every_operation_has_a_request_and_a_reply_type() -> None:
    defined = checking_names(PROTOCOL)
    assert len(OPERATIONS) == len(protocol.OPS)
    missing = [
        f"{type_name(c)}{kind}"
        for c in OPERATIONS
        for kind in ("Request", "Reply")
        if f"{type_name(c)}{kind}" not in defined
    ]
    assert missing == []


def test_the_agents_handlers_take_and_answer_their_types() -> None:
    """Each handler named op_NAME is declared `(op: NameRequest) -> NameReply`."""
    wrong = []
    handlers = set()
    for path in sorted(AGENT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("op_"):
                continue
            constant = node.name[3:].upper()
            if constant not in OPERATIONS:
                continue
            handlers.add(constant)
            stem = type_name(constant)
            arg = node.args.args[0].annotation if node.args.args else None
            returns = ast.unparse(node.returns) if node.returns else ""
            expected = "bytes" if constant == "PACK" else f"{stem}Reply"
            if arg is None or ast.unparse(arg) != f"{stem}Request" or returns != expected:
                wrong.append(f"{path.name}:{node.lineno} {node.name}")
    assert wrong == []
    assert handlers == set(OPERATIONS)


def _sends(tree: ast.AST) -> list[tuple[ast.FunctionDef, ast.Call, str]]:
    """(method, call, "_send" | "_send_raw") for each operation the client sends."""
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("_send", "_send_raw")
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "self"
                ):
                    out.append((fn, node, node.func.attr))
    return out


def test_the_client_sends_typed_requests_and_reads_typed_replies() -> None:
    """runner/agent.py: every operation is sent by a method through _send or _send_raw,
    with a request annotated as its NameRequest, and every JSON answer it reads is cast
    to its NameReply."""
    tree = ast.parse(CLIENT.read_text())
    parents = {
        id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)
    }
    sent, wrong = set(), []
    for fn, call, how in _sends(tree):
        name = ast.unparse(call.args[0])
        constant = name.removeprefix("protocol.")
        stem = type_name(constant)
        if constant not in OPERATIONS:
            wrong.append(f"{fn.name}: sends {name}")
            continue
        sent.add(constant)
        request = call.args[1]
        annotated = {
            n.target.id: ast.unparse(n.annotation)
            for n in ast.walk(fn)
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        }
        if not isinstance(request, ast.Name) or annotated.get(request.id) != (
            f"protocol.{stem}Request"
        ):
            wrong.append(f"{fn.name}: {name}'s request is not a protocol.{stem}Request")
        parent = parents[id(call)]
        # an answer it reads (not a _send_raw's stdout) is read as cast("protocol.NameReply")
        reads = how == "_send" and not isinstance(parent, ast.Expr)
        if reads and not (
            isinstance(parent, ast.Call)
            and ast.unparse(parent.func) == "cast"
            and ast.literal_eval(parent.args[0]) == f"protocol.{stem}Reply"
        ):
            wrong.append(f"{fn.name}: {name}'s answer is not read as protocol.{stem}Reply")
    assert wrong == []
    assert sent == set(OPERATIONS)


def test_the_wire_types_cost_nothing_on_the_host() -> None:
    """They exist for the type checker only: at run time protocol.py defines none of them."""
    for name in checking_names(PROTOCOL):
        assert not hasattr(protocol, name), name


def test_the_probes_document_is_typed() -> None:
    """The probe builds its facts as protocol.ProbeFacts (mypy checks every key it sets)
    and sends them as such: each part the probe sets is a key of the type."""
    tree = ast.parse((PROTOCOL.parent / "collect.py").read_text())
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert ast.unparse(functions["collect"].returns or ast.Constant(None)) == "ProbeFacts"
    assert ast.unparse(functions["dumps_facts"].args.args[0].annotation or ast.Constant(None)) == (
        "ProbeFacts"
    )
    classes = {
        n.name: n for n in ast.walk(ast.parse(PROTOCOL.read_text())) if isinstance(n, ast.ClassDef)
    }
    typed = {
        stmt.target.id
        for name in ("ProbeFacts", "_ProbeFactsLater")
        for stmt in classes[name].body
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    }
    built: set[str] = set()
    for node in ast.walk(functions["collect"]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Dict):
            built |= {str(k.value) for k in node.value.keys if isinstance(k, ast.Constant)}
        facts_key = isinstance(node, ast.Subscript) and ast.unparse(node.value) == "facts"
        if facts_key and isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            built.add(str(node.slice.value))
    assert built and built <= typed, sorted(built - typed)
