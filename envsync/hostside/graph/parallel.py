"""A cold startup graph parsed on the host's cores.

The graph is walked in one process, as before (startup.py); the files the walk will read
next are parsed ahead by worker processes, forked from the probe (the host side is in
memory: nothing is imported or sent again), and their facts are taken when the walk
reaches them. The facts are what a serial parse gives: a pure function of the file's
text, its module name and how it runs. Where a pool cannot start (no fork, no /dev/shm for
its locks) or a worker dies, the walk parses on its own. ENVSYNC_PARSE_JOBS caps the
workers (1: none); only a cold graph starts any: the pool starts once START_AFTER files
not in the parsed-facts cache are waiting (a walk after a change, with a few files to parse,
parses them itself rather than fork a pool for them).
"""

from __future__ import annotations

import os

from ..shared import COMPILE_ERROR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor
    from typing import Any, Tuple

    Parsed = Tuple[str, Any]  # ("ok", facts) | ("error", why)

AHEAD_PER_WORKER = 8  # files submitted ahead of the walk, per worker
START_AFTER = 16  # files waiting to be parsed before the pool starts
RETRIES = 3  # parses again after CPython's shared AST counter was put off by a thread


def workers() -> int:
    """How many processes parse: the cores this process may run on (at most 32)."""
    given = os.environ.get("ENVSYNC_PARSE_JOBS")
    if given:
        try:  # envsync refuses a value out of range; here one is 1 (never a crash)
            return min(max(1, int(given)), 256)
        except ValueError:
            return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(cores, 32)


def python_error(e: BaseException) -> str:
    """What importing a module whose source raised `e` in ast.parse raises, as Python says
    it (`SyntaxError: source code string cannot contain null bytes`): a null byte is a
    ValueError to ast.parse and a SyntaxError to the import system."""
    if isinstance(e, SyntaxError):
        where = f" (line {e.lineno})" if e.lineno else ""
        return f"SyntaxError: {e.msg}{where}"
    if isinstance(e, ValueError):
        return f"SyntaxError: {e}"
    if isinstance(e, RecursionError):
        return "RecursionError: maximum recursion depth exceeded during compilation"
    return f"{type(e).__name__}: {e}"


def parse(data: bytes, name: str, is_package: bool, as_main: bool, runs: tuple[str, ...]) -> Parsed:
    """One file's facts, as GraphBuilder.facts makes them (in a worker, or here)."""
    from ..facts.files import TOKEN_BOUND, marks, source_text
    from .analyse import analyze_source

    found = marks(data)
    if found > TOKEN_BOUND:  # its syntax tree would cost more memory than the bound allows
        return ("error", f"not read: {found} marks of syntax, over the {TOKEN_BOUND} bound")
    text = source_text(data)
    left = RETRIES
    while True:
        try:
            return ("ok", analyze_source(text, name, is_package, as_main, runs))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            return ("error", COMPILE_ERROR + python_error(e))
        except SystemError as e:
            # Python before 3.11.8 and 3.12.1 (gh-106905) keeps one AST recursion
            # counter for all threads: a traceback formatted in another thread (the
            # pool's manager thread, when a worker dies) while this one parses leaves
            # the count off. The text is sound: parse it again.
            if "recursion depth mismatch" not in str(e) or not left:
                raise
            left -= 1


class Ahead:
    """Files parsed ahead of the walk, by their parsed-facts key."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool: ProcessPoolExecutor | None = None
        self.pending: dict[str, Future[Parsed]] = {}
        self.waiting: dict[str, tuple[Any, ...]] = {}  # submitted before the pool started
        self.broken = jobs < 2
        self.submitted = 0

    def room_for(self) -> int:
        return self.jobs * AHEAD_PER_WORKER

    def room(self) -> bool:
        waiting = len(self.pending) + len(self.waiting)
        return not self.broken and waiting < self.room_for()

    def submit(
        self, key: str, data: bytes, name: str, is_package: bool, as_main: bool, runs: Any
    ) -> None:
        if self.broken or key in self.pending or key in self.waiting:
            return
        self.waiting[key] = (data, name, is_package, as_main, runs)
        if self.pool is None and len(self.waiting) < min(START_AFTER, self.room_for()):
            return
        try:
            if self.pool is None:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                context = multiprocessing.get_context("fork")
                self.pool = ProcessPoolExecutor(self.jobs, mp_context=context)
            for waiting, args in list(self.waiting.items()):
                self.pending[waiting] = self.pool.submit(parse, *args)
                del self.waiting[waiting]
                self.submitted += 1
        except Exception:  # no fork, no semaphores (/dev/shm), a pool that broke
            self.broken = True
            self.waiting.clear()

    def take(self, key: str) -> Parsed | None:
        """The facts parsed ahead for `key` (None: not submitted, or lost: parse here)."""
        if self.waiting.pop(key, None) is not None:
            return None  # the pool has not started: the walk parses it
        job = self.pending.pop(key, None)
        if job is None:
            return None
        try:
            return job.result()
        except Exception:  # a worker died (BrokenProcessPool): the rest is parsed here
            self.broken = True
            return None

    def close(self) -> None:
        self.waiting.clear()
        for job in self.pending.values():
            job.cancel()
        self.pending.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
