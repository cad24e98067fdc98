"""The envsync command line: the only place that prints, prompts or exits.

parser.py builds the argparse parser, context.py holds what every command shares (the
inventory, one runner per host, how to collect), commands.py the command functions,
output.py what they print; main.py runs one command and turns errors into exit codes.
"""

from envsync.cli.main import main

__all__ = ["main"]
