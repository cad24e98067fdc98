"""The distributions a pin or a sync-dist replaces together: the fix's own, and those the
reference's version of it needs that the target lacks or has at another version (pure).

`--no-deps` brings no dependency along by itself, and a copy from the reference copies only
what it names: both kinds take the whole group from here.
"""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envsync.model.environment import Distribution, Snapshot
from envsync.model.markers import applies


def dependencies(
    name: str, reference: Snapshot, target: Snapshot, seen: set[str], held: list[str]
) -> list[Distribution]:
    """Reference distributions that `name` needs and the target lacks or has at another
    version, transitively: `--no-deps` brings none of them along by itself."""
    ref = reference.distribution(name)
    out: list[Distribution] = []
    for text in ref.requires if ref else ():
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if applies(req, target) is False:
            continue  # an optional extra, another platform: not needed to import it there
        dep = canonicalize_name(req.name)
        if dep in seen:
            continue
        seen.add(dep)
        have_ref = reference.distribution(dep)
        have_tgt = target.distribution(dep)
        if have_ref is None or (have_tgt is not None and have_tgt.version == have_ref.version):
            continue
        if have_tgt is not None and have_tgt.custom_build:
            held.append(f"{dep}: {have_tgt.version} on the target is a custom build; not replaced")
            continue
        out.append(have_ref)
        out += dependencies(dep, reference, target, seen, held)
    return out


def replaced_group(
    dist: str, reference: Snapshot, target: Snapshot, pinned: set[str], skipped: list[str]
) -> list[Distribution] | None:
    """The reference's `dist` and the dependencies it needs that no earlier step replaces
    (added to `pinned`); None (and why, in `skipped`) when the reference has no `dist`."""
    ref = reference.distribution(dist)
    if ref is None:
        skipped.append(f"{dist}: not on the reference")
        return None
    held: list[str] = []
    deps = dependencies(dist, reference, target, {dist}, held)
    skipped += held
    group = [ref, *(d for d in deps if d.name not in pinned)]
    pinned.update(d.name for d in group)
    return group
