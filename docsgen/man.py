"""envsync(1), the man page, from the real argparse parser (argparse-manpage), checked by groff.

python -m docsgen.man [-o envsync.1] [--check]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from docsgen import text
from envsync import __version__
from envsync.cli.parser import build_parser
from envsync.exitcodes import ExitCode
from envsync.sources.inventory import INVENTORY_ENV

# Macros argparse-manpage writes; a text line that starts with another `.word` is help text
# that wrapped onto a dot (".toml) or ..."), which troff would read as a macro call.
_MACROS = {"TH", "SH", "SS", "TP", "B", "I", "BR", "IR", "RS", "RE", "PP", "IP", "br", "UR", "UE"}


def _text(value: str) -> str:
    """Plain words as roff text: backslashes and a leading dot or quote escaped."""
    value = value.replace("\\", "\\e").replace("`", "").replace("-", "\\-")
    return "\n".join(
        "\\&" + line if line[:1] in (".", "'") else line for line in value.splitlines()
    )


def _guard(roff: str) -> str:
    out = []
    for line in roff.splitlines():
        if line[:1] in (".", "'") and line[1:].split(" ", 1)[0] not in _MACROS:
            line = "\\&" + line
        out.append(line)
    return "\n".join(out) + "\n"


def manpage(parser: argparse.ArgumentParser | None = None) -> str:
    from argparse_manpage.manpage import Manpage  # type: ignore[import-untyped]

    parser = parser or build_parser()
    page = Manpage(
        parser,
        {
            "project_name": "envsync",
            "version": __version__,
            "manual_section": "1",
            "manual_title": "envsync manual",
            "description": parser.description,
        },
    )
    host = (
        "HOST, REF and TGT are an inventory host name, local (this machine's active "
        "virtualenv, else python3 on PATH), or a snapshot (.json), lock (.lock, .toml, a "
        "pylock.toml) or pinned requirements (.txt) file."
    )
    page.add_section("comments", "=", _text(host))
    codes = [f".TP\n.B {c.value}\n{_text(text.EXIT_CODES[c.name])}" for c in ExitCode]
    page.add_section("exit status", "=", "\n".join(codes))
    page.add_section(
        "environment",
        "=",
        f".TP\n.B {INVENTORY_ENV}\nthe inventory file, when --inventory is not given\n"
        ".TP\n.B NO_COLOR\nno colour on a terminal\n"
        ".TP\n.B _ARGCOMPLETE\nset by the shell completion: envsync completes instead of running",
    )
    page.add_section(
        "files",
        "=",
        ".TP\n.B ./envsync.toml\nthe inventory when neither --inventory nor "
        f"{INVENTORY_ENV} names one\n"
        ".TP\n.B ~/.envsync/\non each host: backups, the apply journal, locks, the kept "
        "service flags, the deployed service's pid and log\n"
        ".TP\n.B ~/.cache/envsync/\non each host: file-hash and import-graph caches "
        "(--no-cache skips them)",
    )
    page.add_section(
        "see also",
        "=",
        "envsync COMMAND --help; the documentation site, built from docs/ with mkdocs.",
    )
    return _guard(str(page))


def check(roff: str) -> list[str]:
    """groff's warnings for the page (every category: -ww); [] when it is clean."""
    groff = shutil.which("groff")
    if groff is None:
        return ["groff is not installed (apt-get install groff-base)"]
    proc = subprocess.run(
        [groff, "-man", "-Tutf8", "-ww"],
        input=roff.encode(),
        capture_output=True,
        check=False,
    )
    warnings = proc.stderr.decode(errors="replace").splitlines()
    if proc.returncode != 0:
        warnings.append(f"groff exited {proc.returncode}")
    return warnings


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    cli.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    cli.add_argument("--check", action="store_true", help="exit 1 on any groff warning")
    args = cli.parse_args(argv)
    roff = manpage()
    if args.check:
        warnings = check(roff)
        for line in warnings:
            print(line, file=sys.stderr)
        if warnings:
            return 1
    if args.output:
        Path(args.output).write_text(roff)
    else:
        sys.stdout.write(roff)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
