"""The agent: the host-side program that changes a host, one operation per run.

Every change it makes is under a backup it made first. A failure it foresees ends with one
line on stderr (protocol.ERROR_MARKER and {"kind", "message"}) and exit code 2, so that
its caller decides what the failure means for the user (apply: rolled back; deploy: the
service did not start). One change at a time per environment: mutex.py.
"""
