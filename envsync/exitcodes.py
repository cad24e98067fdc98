"""Process exit codes of the envsync CLI (documented in the README)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    DRIFT = 1  # drift found, or a plan is pending
    USAGE = 2  # usage error or bad input (inventory, lock, snapshot, requirements)
    COLLECT = 3  # host unreachable or collection failed
    APPLY = 4  # apply failed and was rolled back; rollback failed or was refused
    SMOKE = 5  # smoke test failed
    LOCKED = 6  # the environment is locked by another envsync that is changing it
