"""Real drift failures reported in public, as pairs of environments to rebuild from wheels.

Each case names the public report, the SGLang wheel (installed with --no-deps on both
sides), what the reference and the target have besides it (they differ only in the
culprit), the launch flags, and what SGLang's own source says must follow: the import
statement that breaks (file, line and statement, as they are in the wheel) and where the
name is defined on the reference. The tests read the installed files to check all of it
before they ask envsync anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaking:
    """The import statement that fails on the target (paths relative to site-packages)."""

    file: str
    line: int
    statement: str  # the line as it is in the wheel
    module: str  # the module the name is imported from
    name: str
    # where the reference defines the name ("" when no version on the index defines it)
    defined_in: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    report: str  # the public report(s)
    reported: str  # what the report says happens
    sglang: str  # the SGLang requirement, NAME==VERSION
    reference: tuple[str, ...]  # requirements installed on the reference besides SGLang
    target: tuple[str, ...]
    culprit: str  # the distribution that differs
    expected: str  # the severity envsync must give the culprit
    why: str  # why, from the wheel's source
    flags: tuple[str, ...] = ()
    breaking: Breaking | None = None
    # other lines of the wheels the verdict rests on: (file, line, text the line holds)
    source_facts: tuple[tuple[str, int, str], ...] = ()
    pip_check_flags_culprit: bool = False  # `pip check` on the target names the culprit
    cpu_importable: bool = False  # the precision harness really imports the culprit's names
    never_imported: tuple[str, ...] = field(default=())  # negative control: import names


CASES = (
    Case(
        id="transformers-4.49-mllama",
        report="sgl-project/sglang#3626 (also #3862, #3878, #3946)",
        reported="fatal at import: even `launch_server --help` fails",
        sglang="sglang==0.4.3.post2",
        reference=("transformers==4.48.3",),
        target=("transformers==4.49.0",),
        culprit="transformers",
        expected="fatal",
        why="qwen2_5_vl_config is imported at module level on the startup path and imports "
        "is_valid_list_of_images, which transformers 4.49.0's mllama image processor no "
        "longer defines",
        breaking=Breaking(
            file="sglang/srt/configs/qwen2_5_vl_config.py",
            line=51,
            statement="from transformers.models.mllama.image_processing_mllama import "
            "is_valid_list_of_images",
            module="transformers.models.mllama.image_processing_mllama",
            name="is_valid_list_of_images",
            defined_in="transformers/models/mllama/image_processing_mllama.py",
        ),
        cpu_importable=True,
    ),
    Case(
        id="transformers-4.49-mllama-swapped",
        report="sgl-project/sglang#3626, hosts swapped: the older transformers on the target",
        reported="works (4.48.3 is the version SGLang 0.4.3.post2 pins)",
        sglang="sglang==0.4.3.post2",
        reference=("transformers==4.49.0",),
        target=("transformers==4.48.3",),
        culprit="transformers",
        expected="risky",
        why="every name SGLang imports from transformers at startup exists in 4.48.3, most "
        "of them through transformers' lazy `_import_structure` table",
        cpu_importable=True,
    ),
    Case(
        id="outlines-0.0.32-regex",
        report="sgl-project/sglang#194 (also #203, #251)",
        reported="fatal at import of sglang.launch_server",
        sglang="sglang==0.1.12",
        reference=("outlines==0.0.30",),
        target=("outlines==0.0.32",),
        culprit="outlines",
        expected="fatal",
        why="launch_server imports sglang.srt.server, which imports sglang.srt.constrained, "
        "whose module level imports build_regex_from_object; outlines 0.0.32 renamed it "
        "build_regex_from_schema",
        breaking=Breaking(
            file="sglang/srt/constrained/__init__.py",
            line=4,
            statement="from outlines.fsm.json_schema import build_regex_from_object",
            module="outlines.fsm.json_schema",
            name="build_regex_from_object",
            defined_in="outlines/fsm/json_schema.py",
        ),
        source_facts=(
            ("sglang/launch_server.py", 3, "from sglang.srt.server import ServerArgs"),
            ("sglang/srt/server.py", 25, "from sglang.srt.constrained import disable_cache"),
        ),
    ),
    Case(
        id="xgrammar-cached-compiler",
        report="sgl-project/sglang#2166 (fixed by PR #2189 in 0.3.6.post1)",
        reported="ImportError: cannot import name 'CachedGrammarCompiler' from 'xgrammar'",
        sglang="sglang==0.3.6",
        reference=(),  # no xgrammar on the index defines CachedGrammarCompiler any more
        target=("xgrammar==0.1.6",),
        culprit="xgrammar",
        expected="degraded",
        why="in the 0.3.6 wheel the import sits in try/except ImportError that keeps the "
        "error; the backend logs 'Ignore import error' at startup and constrained requests "
        "fail later: no flag is needed to start",
        flags=("--grammar-backend", "xgrammar"),
        breaking=Breaking(
            file="sglang/srt/constrained/xgrammar_backend.py",
            line=24,
            statement="from xgrammar import (",
            module="xgrammar",
            name="CachedGrammarCompiler",
        ),
        source_facts=(
            ("sglang/srt/constrained/xgrammar_backend.py", 23, "try:"),
            ("sglang/srt/constrained/xgrammar_backend.py", 32, "except ImportError as e:"),
            ("sglang/srt/constrained/xgrammar_backend.py", 36, "import_error = e"),
            ("sglang/srt/constrained/xgrammar_backend.py", 119, "Ignore import error"),
            ("sglang/srt/server_args.py", 117, 'grammar_backend: Optional[str] = "outlines"'),
        ),
    ),
    Case(
        id="xgrammar-cached-compiler-default-backend",
        report="sgl-project/sglang#2166, launched without --grammar-backend",
        reported="the reporter chose --grammar-backend xgrammar; 0.3.6's default is outlines",
        sglang="sglang==0.3.6",
        reference=(),
        target=("xgrammar==0.1.6",),
        culprit="xgrammar",
        expected="benign",
        why="0.3.6's default grammar backend is outlines: the scheduler imports "
        "xgrammar_backend only when --grammar-backend xgrammar is given, and no other "
        "module imports xgrammar",
        source_facts=(
            ("sglang/srt/server_args.py", 117, 'grammar_backend: Optional[str] = "outlines"'),
            (
                "sglang/srt/managers/scheduler.py",
                272,
                'elif server_args.grammar_backend == "xgrammar":',
            ),
            (
                "sglang/srt/managers/scheduler.py",
                273,
                "from sglang.srt.constrained.xgrammar_backend",
            ),
        ),
    ),
    Case(
        id="transformers-5.3-gemma4",
        report="SGLang's model registry: 'Ignore import error when loading sglang.srt.models.X' "
        "(mechanism from sgl-project/sglang PR #1513)",
        reported="the architecture is unsupported; the server starts",
        sglang="sglang==0.5.11",
        reference=("transformers==5.6.0",),
        target=("transformers==5.3.0",),
        culprit="transformers",
        expected="degraded",
        why="only the Gemma 4 model modules import Gemma4*Config, which transformers 5.3.0 "
        "lacks; the registry imports every model module inside try/except Exception",
        # the registry imports the model modules in name order: gemma4_audio fails first
        breaking=Breaking(
            file="sglang/srt/models/gemma4_audio.py",
            line=32,
            statement="from transformers import Gemma4AudioConfig",
            module="transformers",
            name="Gemma4AudioConfig",
            defined_in="transformers/models/gemma4/configuration_gemma4.py",
        ),
        source_facts=(
            ("sglang/srt/models/registry.py", 103, "module = importlib.import_module(name)"),
            ("sglang/srt/models/registry.py", 104, "except Exception as e:"),
            ("sglang/srt/models/registry.py", 107, "Ignore import error when loading"),
        ),
        pip_check_flags_culprit=True,  # sglang 0.5.11 requires transformers==5.6.0
        cpu_importable=True,
    ),
    Case(
        id="negative-control",
        report="none: packages SGLang never imports",
        reported="works",
        sglang="sglang==0.4.3.post2",
        reference=("transformers==4.48.3", "six==1.17.0", "tomli==2.0.1"),
        target=("transformers==4.48.3", "six==1.16.0"),
        culprit="six",
        expected="benign",
        why="no module of the SGLang wheel imports six or tomli",
        never_imported=("six", "tomli"),
    ),
)
