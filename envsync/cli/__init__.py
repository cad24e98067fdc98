"""The envsync command line: the only place that prints, prompts or exits.

parser.py builds the argparse parser, options.py turns its namespace into each command's
typed options, commands.py holds the command functions (each calls one stage, the
library's, with a Session: envsync/sources/session.py), output.py what they print; main.py runs
one command and turns errors into exit codes.
"""

from envsync.cli.main import main

__all__ = ["main"]
