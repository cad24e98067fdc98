"""Host lists in Slurm / ClusterShell syntax (`gpu[001-128,130]`), read and written by
ClusterShell's NodeSet: a pattern becomes inventory host names, names fold into a set.

A HOST argument may name one host, a group of the inventory (`gpu_nodes`, `@gpu_nodes`), a
node set (`gpu[001-087]`), ClusterShell's set operations on them (`@gpu_nodes!gpu005`,
`@a&@b`), Ansible's spelling of the same (`gpu_nodes:!gpu005`, `a:&b`), or a glob over the
inventory's host names (`gpu0*`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence

from envsync.errors import InputError

# A glob: matched against the inventory's host names (ClusterShell has no wildcards).
_GLOB = frozenset("*?")
# The most names a node set may expand to (a fleet is thousands of hosts): sized from its
# text before it is expanded, since expanding `gpu[1-100000000]` takes minutes and GBs.
MAX_NAMES = 100_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?(?:/(\d+))?$")
# Where a word is a file or a host's past (`ct200@good`), not a set of hosts.
_FILE_SUFFIXES = (".json", ".lock", ".toml", ".txt", ".in")


def fold(names: Iterable[str]) -> str:
    """The shortest node-set text of these names: `gpu[001-087],ct200`."""
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

    return str(NodeSet.fromlist(list(names), resolver=RESOLVER_NOGROUP))


def size(text: str) -> int:
    """How many names a node set's text names at most, from the text alone (each word's
    bracketed ranges multiplied, the words added): nothing is expanded."""
    total = 0
    for word in _split(text)[::2]:
        count = 1
        for body in re.findall(r"\[([^\[\]]*)\]", word):
            items = 0
            for item in body.split(","):
                match = _RANGE.match(item.strip())
                if match is None:
                    items += 1  # not a range: ClusterShell says what it is
                    continue
                low, high, step = match.groups()
                if high is not None:
                    span = int(high) - int(low)
                    items += max(0, span) // max(1, int(step or 1)) + 1
                else:
                    items += 1
            count *= max(1, items)
        total += count
    return total


def check_size(text: str, word: str) -> None:
    """InputError when `text` (of the argument `word`) names more than MAX_NAMES names."""
    n = size(text)
    if n > MAX_NAMES:
        raise InputError(
            f"{word!r} names up to {n:,} hosts, more than envsync expands ({MAX_NAMES:,})",
            tip="narrow the set, e.g. gpu[001-128]",
        )


def expand(text: str) -> list[str]:
    """Every name of a node set, in its order (`gpu[1-3]` -> gpu1, gpu2, gpu3)."""
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

    check_size(text, text)
    try:
        return list(NodeSet(text, resolver=RESOLVER_NOGROUP))
    except NodeSetException as e:
        raise InputError(
            f"{text!r}: not a node set: {e}", tip="e.g. gpu[001-128,130] or gpu[01-04],ct200"
        ) from e


def is_pattern(word: str) -> bool:
    """Whether a HOST argument can name several hosts (it is not a file, nor `HOST@...`)."""
    if "/" in word or word.lower().endswith(_FILE_SUFFIXES):
        return False
    if "@" in word and not word.startswith("@"):
        return False
    return any(c in word for c in "[],!&^:@*?")


def _ansible_to_clustershell(word: str) -> str:
    """Ansible's `a:b`, `a:&b`, `a:!b` as ClusterShell's `a,b`, `a&b`, `a!b`."""
    return word.replace(":&", "&").replace(":!", "!").replace(":", ",")


def select(word: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The host names a HOST argument names among `hosts`; a word that names no set (a
    host, a file, `HOST@good`) is itself. Raises InputError for a set naming unknown hosts
    or groups."""
    if word in groups and word not in hosts:
        return tuple(groups[word])
    if not is_pattern(word) or word in hosts:
        return (word,)
    if _GLOB & set(word):
        matched = tuple(h for h in hosts if fnmatch.fnmatchcase(h, word))
        if not matched:
            raise InputError(
                f"{word!r} matches no host of the inventory",
                tip="list them with `ansible-inventory --graph`, or name them as gpu[001-004]",
            )
        return matched
    from ClusterShell.NodeSet import NodeSet, NodeSetException
    from ClusterShell.NodeUtils import GroupResolver, GroupSource

    text = _ansible_to_clustershell(word)
    for name in sorted(groups, key=len, reverse=True):
        # a bare group name inside a set (`gpu_nodes!gpu005`) reads as the group
        if name not in hosts and name in _words(text):
            text = _replace_word(text, name, f"@{name}")
    check_size(text, word)
    source = GroupSource("envsync", {name: ",".join(members) for name, members in groups.items()})
    unknown_groups = [g for g in _groups_named(text) if g not in groups]
    if unknown_groups:
        raise InputError(
            f"{word!r}: no group {unknown_groups[0]!r} in the inventory",
            tip=f"groups: {', '.join(sorted(groups)) or 'none'}",
        )
    try:
        names = list(NodeSet(text, resolver=GroupResolver(source)))
    except NodeSetException as e:
        raise InputError(
            f"{word!r}: not a host list: {e}", tip="e.g. gpu[001-128,130] or @gpu_nodes!gpu005"
        ) from e
    known = set(hosts)
    missing = [n for n in names if n not in known]
    if missing:
        raise InputError(
            f"{word!r} names {len(missing)} host(s) the inventory does not have: {fold(missing)}",
            tip="add them to the inventory, or narrow the set",
        )
    if not names:
        raise InputError(f"{word!r} names no host")
    return tuple(names)


_OPERATORS = ",!&^"


def _split(text: str) -> list[str]:
    """The words of a set expression and the operators between them, in turn (an operator
    inside brackets, `gpu[1,3]`, is part of its word)."""
    parts, word, depth = [], "", 0
    for c in text:
        depth += (c == "[") - (c == "]")
        if c in _OPERATORS and depth == 0:
            parts += [word, c]
            word = ""
        else:
            word += c
    return [*parts, word]


def _words(text: str) -> set[str]:
    return set(_split(text)[::2])


def _replace_word(text: str, name: str, new: str) -> str:
    parts = _split(text)
    return "".join(new if i % 2 == 0 and p == name else p for i, p in enumerate(parts))


def _groups_named(text: str) -> list[str]:
    return [w[1:] for w in _words(text) if w.startswith("@")]


def select_all(
    words: Sequence[str], hosts: Sequence[str], groups: Mapping[str, Sequence[str]]
) -> tuple[str, ...]:
    """Every host the HOST arguments name, each once, in the order named."""
    out: dict[str, None] = {}
    for word in words:
        out.update(dict.fromkeys(select(word, hosts, groups)))
    return tuple(out)
