"""Repair: a plan of fixes (pure), applied to a host with backup, journal and rollback (the one
stage that changes packages and files on a host), and rolled out to a fleet in canary batches.
"""
