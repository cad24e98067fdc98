"""Whether a requirement applies on a host: its environment marker, evaluated one way.

classify (which requirements of the target's packages the reference satisfies) and plan
(which dependencies a pin brings along) both ask `applies`, so they agree.
"""

from __future__ import annotations

from functools import cache

from packaging.markers import InvalidMarker, default_environment
from packaging.requirements import Requirement

from envsync.model.environment import Snapshot, Unavailable


@cache
def _environment(version: str | None, implementation: str | None) -> dict[str, str]:
    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    if version is not None:
        env["python_full_version"] = version
        env["python_version"] = ".".join(version.split(".")[:2])
    if implementation is not None:
        env["implementation_name"] = implementation
    # Only what installing the package itself needs: no optional extra is selected.
    env["extra"] = ""
    return env


def marker_environment(snapshot: Snapshot) -> dict[str, str]:
    """The marker variables of the host's interpreter (this machine's where not known)."""
    interp = snapshot.interpreter
    if isinstance(interp, Unavailable):
        return _environment(None, None)
    return _environment(interp.version, interp.implementation)


def applies(requirement: Requirement, snapshot: Snapshot) -> bool | None:
    """Whether `requirement` applies on the host of `snapshot` with no extra selected
    (`extra == "x"` does not, `python_version < "3.11"` on 3.10 does); None when its
    marker cannot be evaluated."""
    if requirement.marker is None:
        return True
    try:
        return requirement.marker.evaluate(marker_environment(snapshot))
    except (InvalidMarker, ValueError, KeyError):
        return None
