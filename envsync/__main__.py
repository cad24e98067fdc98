"""Entry point for `python -m envsync`."""

from envsync.cli import main

raise SystemExit(main())
