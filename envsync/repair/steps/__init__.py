"""The kinds of step a plan is made of, one module each (`pin`, `sync_dist`, `sync_file`,
`flag`): its data, its check, its description, how it is applied, what it backs up, and the
step a fix becomes. Here: the `Step` union and the dispatches over it.

Every dispatch is a `match` whose last case is `assert_never`: a kind added to `Step` and
not handled is a mypy error, never a step skipped in silence (`tests/repair/test_steps.py`,
`tests/project/test_exhaustive.py`).
"""

from __future__ import annotations

from envsync.exhaustive import assert_never
from envsync.model.environment import Snapshot
from envsync.repair.steps import flag, pin, sync_dist, sync_file
from envsync.repair.steps.context import BacksUp, StepContext
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


def check_paths(step: Step, target: str) -> None:
    """StalePlan (naming the plan's `target`) when a path the step names is not inside its
    package directory; only a sync-file names paths."""
    match step:
        case SyncFileStep():
            sync_file.check_paths(step, target)
        case PinStep() | SyncDistStep() | FlagStep():
            pass  # distributions by name, a flag: no path
        case _:
            assert_never(step)


def backs_up(step: Step, target: Snapshot) -> BacksUp:
    """What the backup must hold before the step runs on the target."""
    match step:
        case PinStep():
            return pin.backs_up(step, target)
        case SyncDistStep():
            return sync_dist.backs_up(step, target)
        case SyncFileStep():
            return sync_file.backs_up(step, target)
        case FlagStep():
            return flag.backs_up(step, target)
        case _:
            assert_never(step)


def apply(step: Step, ctx: StepContext) -> None:
    """Run the step on the target (ApplyError, or the agent's, when it fails)."""
    match step:
        case PinStep():
            pin.apply(step, ctx)
        case SyncDistStep():
            sync_dist.apply(step, ctx)
        case SyncFileStep():
            sync_file.apply(step, ctx)
        case FlagStep():
            flag.apply(step, ctx)
        case _:
            assert_never(step)
