"""The service on a host: deploy it, smoke-test it, and tell what a crash means.

deploy.py holds deploy (systemd drop-in or a plain process), stop and the fail-fast smoke
test; host.py what the deploy, smoke and stop commands do for one inventory host (the
crash kept on the host, tokens/s compared: throughput.py); diagnose.py traces a crash to
the finding of `diff` it matches.
"""

from envsync.service.deploy import (
    FIRST_POLL_SECONDS,
    POLL_SECONDS,
    PROCESS_NAME,
    Deployment,
    Verdict,
    attach,
    crash_chain,
    deploy,
    dropin_text,
    endpoints,
    keep_crash,
    last_exception,
    last_frame,
    smoke,
    stop,
)

__all__ = [
    "FIRST_POLL_SECONDS",
    "POLL_SECONDS",
    "PROCESS_NAME",
    "Deployment",
    "Verdict",
    "attach",
    "crash_chain",
    "deploy",
    "dropin_text",
    "endpoints",
    "keep_crash",
    "last_exception",
    "last_frame",
    "smoke",
    "stop",
]
