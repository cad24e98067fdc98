"""The gate for one multi-node server: its nodes must agree, whatever the reference says (pure).

The nodes of one server (an inventory group with `server = true`, or an Ansible group with
`envsync_server: true`) run one model as ranks of one job: torch.distributed and NCCL join
them into one communicator. A difference among them that each node survives alone breaks
the server as a whole: a collective that hangs, a rank that crashes. So any difference in
these facts among the members is fatal for the group, with why:
torch (version and build), NCCL (version and library hash), the NCCL net plugin, the GPU
driver, Python, the serving engine (its version and patch set), NCCL_*, GLOO_* and CUDA_*
variables.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envsync.collect.identity import patch_set
from envsync.model.environment import GpuInfo, Interpreter, Nccl, Snapshot, Torch
from envsync.model.findings import Evidence, Finding, Report, short_hash
from envsync.model.nodeset import fold
from envsync.model.vocab import Kind

# The variables whose difference among the nodes is fatal (recorded by default: DEFAULT_ENV).
SERVER_ENV = ("NCCL_*", "GLOO_*", "CUDA_*")

# Each fact the nodes must agree on: its words, the kind of finding, and what breaks.
FACTS: dict[str, tuple[str, Kind, str]] = {
    "torch": (
        "torch (version and build)",
        "torch",
        "ranks built from different torch versions or CUDA builds exchange tensors and "
        "c10d messages the other side does not expect: a collective hangs or a rank "
        "crashes at its first all-reduce",
    ),
    "nccl": (
        "NCCL (version and library)",
        "system",
        "NCCL's wire protocol and algorithms differ between builds: ranks with different "
        "libnccl join one communicator and hang in ncclCommInitRank or the first "
        "collective, or abort with an internal error",
    ),
    "nccl_net": (
        "the NCCL net plugin",
        "system",
        "a net plugin on some nodes only makes those ranks pick another transport (the "
        "plugin's IB/EFA against sockets) than the others: the communicator never "
        "connects and the first collective hangs",
    ),
    "driver": (
        "the GPU driver",
        "gpu",
        "nodes on different drivers run other CUDA and NCCL code paths (P2P, CUDA graphs, "
        "NVLS): ranks hang at init or one crashes where the others run",
    ),
    "python": (
        "Python",
        "python",
        "objects pickled on one rank (torch.distributed's object collectives, Ray's "
        "messages) may not load on another Python: a rank crashes on its first message",
    ),
    "engine": (
        "the serving engine (version and patch set)",
        "version",
        "ranks running different engine code disagree on the model's sharding, the "
        "scheduler's messages or the kernels they launch: a rank crashes or the others "
        "wait for it forever",
    ),
    "env": (
        "NCCL_*, GLOO_*, CUDA_* variables",
        "system",
        "these variables set how each rank builds its communicator (transport, network "
        "interface, algorithm, visible devices): ranks that disagree hang at init or in "
        "the first collective",
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeFacts:
    """What the gate compares of one node (a few strings: kept for every member)."""

    host: str
    # fact -> its value as a person reads it; a fact the node could not tell is absent
    facts: Mapping[str, str]
    env: Mapping[str, str]  # the NCCL_*/GLOO_*/CUDA_* variables set on the node


def _torch(torch: object) -> str | None:
    if torch is None:
        return "not installed"
    if not isinstance(torch, Torch):
        return None
    build = ", ".join(
        f"{k} {v}"
        for k, v in (("cuda", torch.cuda), ("hip", torch.hip), ("git", torch.git_version))
        if v
    )
    return f"{torch.version} ({build})" if build else torch.version


def _nccl(snapshot: Snapshot) -> tuple[str | None, str | None]:
    wheels = ", ".join(
        f"{d.name} {d.version}" for d in snapshot.distributions if d.name.startswith("nvidia-nccl")
    )
    nccl = snapshot.nccl
    if nccl is None:
        return (f"{wheels} (no libnccl found)" if wheels else "none"), "none"
    if not isinstance(nccl, Nccl):
        return None, None
    library = "no libnccl"
    if nccl.library:
        library = f"{nccl.version or 'version unknown'}, libnccl sha256 {short_hash(nccl.sha256)}"
    plugins = ", ".join(f"{p.name} ({short_hash(p.sha256)})" for p in nccl.net_plugins) or "none"
    return (f"{library}; {wheels}" if wheels else library), plugins


def _engine(snapshot: Snapshot) -> str | None:
    watched = [d for d in snapshot.distributions if d.watched]
    if not watched:
        return None
    parts = []
    for dist in sorted(watched, key=lambda d: d.name):
        changed = sorted({*dist.patched, *dist.added, *dist.missing})
        if not changed:
            parts.append(f"{dist.name} {dist.version}, no local patches")
            continue
        digest = patch_set(dist, changed)
        parts.append(
            f"{dist.name} {dist.version}, {len(changed)} patched file(s) "
            f"(patch set {short_hash(digest)})"
        )
    return "; ".join(parts)


def node_facts(host: str, snapshot: Snapshot) -> NodeFacts:
    """The facts of one node of a server, from its snapshot."""
    facts: dict[str, str | None] = {"torch": _torch(snapshot.torch)}
    facts["nccl"], facts["nccl_net"] = _nccl(snapshot)
    gpu = snapshot.gpu
    facts["driver"] = gpu.driver_version if isinstance(gpu, GpuInfo) else None
    interpreter = snapshot.interpreter
    facts["python"] = (
        f"{interpreter.implementation} {interpreter.version}"
        if isinstance(interpreter, Interpreter)
        else None
    )
    facts["engine"] = _engine(snapshot)
    env = {
        name: value
        for name, value in snapshot.env.items()
        if any(fnmatch.fnmatchcase(name, p) for p in SERVER_ENV)
    }
    return NodeFacts(host=host, facts={k: v for k, v in facts.items() if v is not None}, env=env)


def _finding(
    server: str, subject: str, fact: str, values: Mapping[str, str], detail: str = ""
) -> Finding:
    label, kind, why = FACTS[fact]
    by_value: dict[str, list[str]] = {}
    for host, value in values.items():
        by_value.setdefault(value, []).append(host)
    ranked = sorted(by_value.items(), key=lambda item: (-len(item[1]), fold(item[1])))
    shown = "; ".join(f"{fold(hosts)}: {value}" for value, hosts in ranked)
    return Finding(
        subject=subject,
        kind=kind,
        reference=ranked[0][0],
        target="; ".join(value for value, _ in ranked[1:]),
        severity="fatal",
        reason=f"the nodes of server {server} differ in {detail or label} ({shown}): {why}.",
        decided_by="facts",
        evidence=(
            Evidence(
                source="facts",
                detail=f"{label} compared among the {len(values)} nodes of {server}",
            ),
        ),
    )


def server_report(server: str, nodes: Sequence[NodeFacts]) -> Report:
    """The gate of one server: a fatal finding for each fact its nodes do not agree on."""
    findings = []
    for fact, (label, _, _) in FACTS.items():
        if fact == "env":
            continue
        values = {n.host: n.facts[fact] for n in nodes if fact in n.facts}
        if len(set(values.values())) > 1:
            findings.append(_finding(server, f"{server}: {label}", fact, values))
    names = sorted({name for n in nodes for name in n.env})
    for name in names:
        values = {n.host: n.env.get(name, "unset") for n in nodes}
        if len(set(values.values())) > 1:
            findings.append(_finding(server, f"{server}: {name}", "env", values, name))
    hosts = [n.host for n in nodes]
    return Report(
        reference=f"one another ({fold(hosts)})",
        target=f"server {server}",
        findings=tuple(findings),
        notes=(f"{server}: fewer than two of its nodes were checked",) if len(nodes) < 2 else (),
    )
