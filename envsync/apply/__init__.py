"""Apply a Plan to a host, with backup, journal and rollback: the one stage that changes
packages and files on a host.

transaction.py holds the apply (its steps, the backup it makes and the rollback); agent.py
is the typed client of the host agent (envsync/hostside/agent/, the program that runs on
the host); mutex.py the lock that one changing command holds on the target.
"""

from envsync.apply.agent import Agent, BackupInfo
from envsync.apply.transaction import (
    PIP_TIMEOUT,
    Applied,
    apply_plan,
    backups,
    install_argv,
    rollback,
)

__all__ = [
    "PIP_TIMEOUT",
    "Agent",
    "Applied",
    "BackupInfo",
    "apply_plan",
    "backups",
    "install_argv",
    "rollback",
]
