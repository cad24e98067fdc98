"""The mkdocs hook: the docs' `<!-- envsync:NAME ... -->` directives expanded from the code.

Reference pages, schemas, vocabularies, exit codes, the inventory's keys, example outputs and
measured figures are made here at build time, from the real parser, dataclasses and files
the programs wrote; nothing of them is typed into a page. After the build, the man page and
the completion scripts are written into the site, the man page checked by groff.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # mkdocs loads this file by path: envsync and docsgen from here
    sys.path.insert(0, str(ROOT))

from docsgen import cli, figures, invocations, man, quickstart, schema, tables  # noqa: E402
from envsync.cli import completion  # noqa: E402
from envsync.cli.parser import build_parser  # noqa: E402
from envsync.report import DEFAULT_WIDTH  # noqa: E402

# The tip line under a usage error (cli/usage.py): the directive's command line is wrong.
USAGE_ERROR = re.compile(r"^Tip: `envsync[^`]* --help` ", re.M)
DIRECTIVE = re.compile(r"<!--\s*envsync:(?P<name>[\w-]+)(?P<args>[^>]*?)-->")
# CI sets this: an output or figure file that is missing is then an error, not a note.
REQUIRE = "ENVSYNC_DOCS_REQUIRE_OUTPUTS"
# Samples an example script wrote under reports/ (ignored by git), put into the site under
# samples/ when they are there: the pages link them (`<!-- envsync:sample PATH... -->`).
SAMPLES = {"reports/fleet.html": "examples/fleet.sh", "reports/fleet.png": "examples/fleet.sh"}


def _options(args: list[str]) -> tuple[list[str], dict[str, str]]:
    plain = [a for a in args if "=" not in a]
    named = dict(a.split("=", 1) for a in args if "=" in a)
    return plain, named


# The class of a block of a program's output: its type is set small enough that a table
# of report.DEFAULT_WIDTH columns fits the content column (docs/stylesheets/extra.css).
OUTPUT_CLASS = "envsync-output"


def _fence(text: str, lang: str = "", *, output: bool = False) -> str:
    ticks = "````" if "```" in text else "```"
    if output:
        lang = "{ " + " ".join([*([f".{lang}"] if lang else []), f".{OUTPUT_CLASS}"]) + " }"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}\n"


def _as_shown(text: str) -> str:
    """A program's output with this checkout's and this user's paths made relative."""
    return text.replace(f"{ROOT}/", "").replace(str(ROOT), ".").replace(str(Path.home()), "~")


def output(path: str, named: dict[str, str]) -> str:
    """A file the quick start (or another envsync run) wrote, as it wrote it."""
    file = ROOT / path
    if not file.exists():
        if os.environ.get(REQUIRE):
            raise PluginError(f"{path}: not written; run `bash examples/quickstart.sh` first")
        return (
            f'!!! note "Written by the quick start"\n\n    `{path}` is made by '
            "`bash examples/quickstart.sh`; run it, then build the docs again.\n"
        )
    text = _as_shown(file.read_text())
    if "lines" in named:  # the start of a long file
        lines = text.splitlines()
        keep = int(named["lines"])
        if len(lines) > keep:
            text = "\n".join([*lines[:keep], f"# … {len(lines) - keep} more lines"])
    return _fence(text, named.get("lang", "text"), output=True)


def sample(paths: list[str], page: str) -> str:
    """Links to samples an example script wrote (an image shown): or, where they are not
    there, a note naming the script. CI does not run those scripts: never required."""
    unknown = [p for p in paths if p not in SAMPLES]
    if unknown:
        raise PluginError(f"{page}: not a sample the site carries: {', '.join(unknown)}")
    missing = [p for p in paths if not (ROOT / p).exists()]
    if missing:
        scripts = " and ".join(sorted({f"`bash {SAMPLES[p]}`" for p in missing}))
        return (
            f'!!! note "Written by an example script"\n\n    `{"`, `".join(missing)}` '
            f"are made by {scripts}; run it, then build the docs again.\n"
        )
    up = "../" * page.count("/")
    out = []
    for path in paths:
        name = Path(path).name
        target = f"{up}samples/{name}"
        out.append(f"![{name}]({target})" if name.endswith(".png") else f"[{name}]({target})")
    return "\n\n".join(out) + "\n"


def run(args: list[str], named: dict[str, str]) -> str:
    """envsync run now, as a user would (its stdout and stderr, and its exit code), with
    only its own folder on PATH: what it prints cannot depend on this machine's tools."""
    inventory = ROOT / named["inventory"]
    env = {
        "PATH": str(Path(sys.executable).parent),
        "HOME": os.environ.get("HOME", "/"),
        # The width the docs' code blocks show whole (the CSS gives them the room).
        "COLUMNS": str(DEFAULT_WIDTH),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "envsync", "--inventory", str(inventory), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
        check=False,
    )
    if USAGE_ERROR.search(proc.stdout):
        raise PluginError(f"envsync {' '.join(args)}: not a valid command line: {proc.stdout}")
    shown = f"$ envsync {' '.join(args)}\n{_as_shown(proc.stdout)}(exit {proc.returncode})"
    return _fence(shown, "text", output=True)


def expand(name: str, args: list[str], page: str) -> str:
    plain, named = _options(args)
    skip = frozenset(named.get("skip", "").split(",")) - {""}
    match name:
        case "cli":
            return cli.reference_markdown(build_parser())
        case "schema":
            return schema.schema_markdown(plain[0], skip, int(named.get("level", "3")))
        case "vocab":
            return tables.vocabulary(plain[0])
        case "exit-codes":
            return tables.exit_codes()
        case "inventory-keys":
            return tables.inventory_keys()
        case "output":
            return output(plain[0], named)
        case "run":
            return run(plain, named)
        case "file":
            return _fence((ROOT / plain[0]).read_text(), named.get("lang", ""))
        case "sample":
            return sample(plain, page)
        case "quickstart":
            return quickstart.tutorial(ROOT)
        case "performance":
            return _required(figures.performance(ROOT), figures.PERFORMANCE)
        case "reliability":
            return _required(figures.reliability(ROOT), figures.RELIABILITY)
        case "corpus":
            return _required(figures.corpus(ROOT), figures.CORPUS)
    raise PluginError(f"{page}: unknown directive envsync:{name}")


def _required(markdown: str, path: str) -> str:
    if markdown.startswith("!!!") and os.environ.get(REQUIRE) == "all":
        raise PluginError(f"{path}: not written")
    return markdown


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    where = page.file.src_uri
    wrong = invocations.problems(markdown, build_parser())
    if wrong:
        raise PluginError(f"{where}: " + "; ".join(wrong))
    try:
        return DIRECTIVE.sub(lambda m: expand(m["name"], m["args"].split(), where), markdown)
    except (tables.DriftError, ValueError, OSError, IndexError, KeyError) as e:
        raise PluginError(f"{where}: {e}") from e


def on_files(files: Files, config: Any) -> Files:
    """The man page (checked by groff: any warning fails the build) and the completion
    scripts, as files of the site that pages can link to."""
    roff = man.manpage(build_parser())
    warnings = man.check(roff)
    if warnings:
        raise PluginError("the man page: " + "; ".join(warnings))
    made = {
        "envsync.1": roff,
        "completion/envsync.bash": completion.script("bash"),
        "completion/_envsync": completion.script("zsh"),
    }
    for uri, content in made.items():
        files.append(File.generated(config, uri, content=content))
    for path in SAMPLES:
        if (ROOT / path).exists():
            uri = f"samples/{Path(path).name}"
            files.append(File.generated(config, uri, abs_src_path=str(ROOT / path)))
    return files


def on_post_build(config: Any) -> None:
    stale = schema.unrendered()
    if stale:
        raise PluginError(f"docsgen/text.py FIELDS of classes no page shows: {', '.join(stale)}")
