"""The kinds of step a plan is made of, one module each (`pin`, `sync_dist`, `sync_file`,
`flag`): its data, its check, its description, and the step a fix becomes. Here: the `Step`
union and the dispatches over it.

Every dispatch is a `match` whose last case is `assert_never`: a kind added to `Step` and
not handled is a mypy error, never a step skipped in silence (`tests/test_steps.py`,
`tests/test_exhaustive.py`).
"""

from __future__ import annotations

from envsync.exhaustive import assert_never
from envsync.repair.steps import flag, pin, sync_dist, sync_file
from envsync.repair.steps.flag import FlagStep
from envsync.repair.steps.pin import PinStep
from envsync.repair.steps.sync_dist import SyncDistStep
from envsync.repair.steps.sync_file import SyncFileStep

# One class per kind of step (vocab.FixKind), told apart by `kind` in a saved plan.
Step = PinStep | SyncDistStep | SyncFileStep | FlagStep


def problems(step: Step, i: int) -> list[str]:
    """What makes step `i` unsafe to apply: a requirement that is not `NAME==VERSION`, a
    distribution that is not a name, a flag a plan may not set (empty when nothing)."""
    match step:
        case PinStep():
            return pin.problems(step, i)
        case SyncDistStep():
            return sync_dist.problems(step, i)
        case SyncFileStep():
            return sync_file.problems(step, i)
        case FlagStep():
            return flag.problems(step, i)
        case _:
            assert_never(step)


def describe(step: Step) -> list[str]:
    """What the step runs and changes, in the lines `plan.describe` prints under it."""
    match step:
        case PinStep():
            return pin.describe(step)
        case SyncDistStep():
            return sync_dist.describe(step)
        case SyncFileStep():
            return sync_file.describe(step)
        case FlagStep():
            return flag.describe(step)
        case _:
            assert_never(step)
