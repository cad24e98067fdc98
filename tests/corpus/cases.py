"""Real drift failures reported in public, as pairs of environments to rebuild from wheels.

Each case names the public report, the engine's wheel (installed with --no-deps on both
sides), what the reference and the target have besides it (they differ only in the
culprit), the launch flags, and what the engine's own source says must follow: the import
statement that breaks (file, line and statement, as they are in the wheel) and where the
name is defined on the reference. The tests read the installed files to check all of it
before they ask envsync anything.

CASES are SGLang wheels with the few packages each case is about. STACKS are cases on a
whole serving stack (vLLM and its ~130 packages, torch's CPU build; tests/corpus/stacks.py
builds them): each says how the service is started (`entries`: the console script, `-m`),
the exception a real import raises on the target (`raising`: its statement and the frame
that raises it, from the wheels) and where the reference's real start stops on a CPU.
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
class Raising:
    """The exception a real import raises on the target, as the wheels say it must: the
    engine's statement whose import fails, and the frame that raises (paths relative to
    site-packages; line as in the wheel)."""

    file: str
    line: int
    statement: str
    exception: str  # its type, as Python names it
    message: str  # a part of its text
    raised_in: str  # the raising frame's file, line and statement
    raised_line: int
    raised_statement: str
    # an exception named only by the chain: its text, and the file of a frame it went through
    cause: str = ""
    cause_in: str = ""
    cause_line: int = 0
    cause_statement: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One way to start the service, and the verdict envsync gives the culprit then."""

    command: tuple[str, ...]  # the inventory's [service].command
    run: tuple[
        str, ...
    ]  # how the truth test starts it: ("script", "mod:fn", ARGS...) | ("module", "mod", ARGS...)
    static: str  # the culprit's severity without the import check


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    report: str  # the public report(s)
    reported: str  # what the report says happens
    engine: str  # the engine's requirement (SGLang, vLLM), NAME==VERSION
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
    # STACKS only
    entries: tuple[Entry, ...] = ()
    raising: Raising | None = None
    removed: tuple[str, ...] = ()  # distributions of the reference the target lacks
    # where a real start of the reference stops on a CPU: "exit 0" (the help printed), or
    # the text of the error vLLM >= 0.10 raises after every import when it finds no device
    cpu_stop: str = "exit 0"


CASES = (
    Case(
        id="transformers-4.49-mllama",
        report="sgl-project/sglang#3626 (also #3862, #3878, #3946)",
        reported="fatal at import: even `launch_server --help` fails",
        engine="sglang==0.4.3.post2",
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
        engine="sglang==0.4.3.post2",
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
        engine="sglang==0.1.12",
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
        engine="sglang==0.3.6",
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
        engine="sglang==0.3.6",
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
        engine="sglang==0.5.11",
        reference=("transformers==5.6.0",),
        target=("transformers==5.3.0",),
        culprit="transformers",
        # the server starts and Gemma 4 is unsupported (degraded), but statically that is
        # not proven: startup imports transformers at module level, unguarded
        # (sglang/srt/configs/afmoe.py:3), and its version differs (issue 45, item 2)
        expected="risky",
        why="only the Gemma 4 model modules import Gemma4*Config, which transformers 5.3.0 "
        "lacks; the registry imports every model module inside try/except Exception; "
        "transformers itself is imported at module level, unguarded, so degraded is not "
        "proven without the import check",
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
        engine="sglang==0.4.3.post2",
        reference=("transformers==4.48.3", "six==1.17.0", "tomli==2.0.1"),
        target=("transformers==4.48.3", "six==1.16.0"),
        culprit="six",
        expected="benign",
        why="no module of the SGLang wheel imports six or tomli",
        never_imported=("six", "tomli"),
    ),
)


VLLM_SERVE = ("vllm", "serve", "/models/m")
VLLM_MODULE = ("{python}", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/m")
CLI = ("script", "vllm.entrypoints.cli.main:main", "serve", "--help")
API = ("module", "vllm.entrypoints.openai.api_server", "--help")
NO_DEVICE = "RuntimeError: Failed to infer device type"

STACKS = (
    Case(
        id="vllm-openai-actionfind",
        report="vllm-project/vllm#22482 (also sgl-project/sglang#8886)",
        reported="ImportError: cannot import name 'ActionFind' at start: vLLM 0.10.1+ needs "
        "openai>=1.99.1, and an upgrade of vLLM kept 0.10.0's openai<=1.90.0",
        engine="vllm==0.10.2",
        reference=(),
        target=("openai==1.90.0",),
        culprit="openai",
        expected="fatal",
        why="the reasoning parsers' package imports every parser at module level; the gpt-oss "
        "one imports harmony_utils, which imports ActionFind from openai; both entries reach "
        "it through vllm.engine.arg_utils (the console script first through "
        "vllm/entrypoints/cli/__init__.py, its parent package)",
        breaking=Breaking(
            file="vllm/entrypoints/harmony_utils.py",
            line=14,
            statement="from openai.types.responses.response_function_web_search import (",
            module="openai.types.responses.response_function_web_search",
            name="ActionFind",
            defined_in="openai/types/responses/response_function_web_search.py",
        ),
        source_facts=(
            (
                "vllm/entrypoints/cli/__init__.py",
                3,
                "from vllm.entrypoints.cli.benchmark.latency import BenchmarkLatencySubcommand",
            ),
            ("vllm/engine/arg_utils.py", 40, "from vllm.reasoning import ReasoningParserManager"),
            ("vllm/reasoning/__init__.py", 7, "from .gptoss_reasoning_parser import"),
            (
                "vllm/reasoning/gptoss_reasoning_parser.py",
                9,
                "from vllm.entrypoints.harmony_utils import parse_chat_output",
            ),
        ),
        pip_check_flags_culprit=True,  # vllm 0.10.2 requires openai>=1.99.1
        # `-m vllm.entrypoints.openai.api_server` on the same pair: tests/corpus/
        # test_reachability.py::test_vllm_serve_and_the_module_get_the_same_verdicts (both
        # entries really die there, and get the same verdict); one entry here keeps CI short
        entries=(Entry(command=VLLM_SERVE, run=CLI, static="fatal"),),
        raising=Raising(
            file="vllm/entrypoints/harmony_utils.py",
            line=14,
            statement="from openai.types.responses.response_function_web_search import (",
            exception="ImportError",
            message="cannot import name 'ActionFind' from "
            "'openai.types.responses.response_function_web_search'",
            raised_in="vllm/entrypoints/harmony_utils.py",
            raised_line=14,
            raised_statement="from openai.types.responses.response_function_web_search import (",
        ),
        cpu_stop=NO_DEVICE,
    ),
    Case(
        id="vllm-aimv2-transformers-4.54",
        report="vllm-project/vllm#22178, vllm-project/vllm-ascend#2046; `vllm serve` tracebacks "
        "from vllm/entrypoints/cli/__init__.py:3 in zai-org/GLM-V#84, gpustack/gpustack#2665 "
        "(fixed by vllm-project/vllm PR #20921, in 0.10.0)",
        reported="ValueError: 'aimv2' is already used by a Transformers config, pick another name.",
        engine="vllm==0.9.2",
        reference=(),
        target=("transformers==4.54.0",),
        culprit="transformers",
        expected="fatal",
        why="vLLM's Ovis config registers 'aimv2' with AutoConfig at module level; "
        "transformers 4.54.0 registers it itself, and its registry raises a ValueError (no "
        "reading of the code sees that: only a real import does)",
        source_facts=(
            (
                "vllm/entrypoints/cli/__init__.py",
                3,
                "from vllm.entrypoints.cli.benchmark.latency import BenchmarkLatencySubcommand",
            ),
            (
                "vllm/transformers_utils/configs/__init__.py",
                26,
                "from vllm.transformers_utils.configs.ovis import OvisConfig",
            ),
        ),
        entries=(Entry(command=VLLM_SERVE, run=CLI, static="risky"),),
        raising=Raising(
            file="vllm/transformers_utils/configs/ovis.py",
            line=76,
            statement='AutoConfig.register("aimv2", AIMv2Config)',
            exception="ValueError",
            message="'aimv2' is already used by a Transformers config, pick another name.",
            raised_in="transformers/models/auto/configuration_auto.py",
            raised_line=993,
            raised_statement="raise ValueError(f\"'{key}' is already used by a Transformers "
            'config, pick another name.")',
        ),
        cpu_stop=NO_DEVICE,
    ),
    Case(
        id="vllm-processormixin-torchvision",
        report="vllm-project/vllm#18776 (the same error with the chain through "
        "image_utils.py in vllm-project/vllm#16471, xorbitsai/inference#4073)",
        reported="ModuleNotFoundError: Could not import module 'ProcessorMixin'. Are this "
        "object's requirements defined correctly?",
        engine="vllm==0.8.5.post1",
        reference=(),
        target=("torchvision==0.28.0",),
        culprit="torchvision",
        expected="fatal",
        why="only transformers imports torchvision (image_utils.py, under "
        "is_torchvision_available()); torchvision 0.28.0's extension was built for another "
        "torch, so registering its nms operator raises a RuntimeError, which transformers' "
        "lazy module re-raises as 'Could not import module ProcessorMixin': the culprit is "
        "named only in the exception's cause",
        pip_check_flags_culprit=True,  # vllm 0.8.5.post1 requires torchvision==0.21.0
        # benign until the imports inside transformers are read (image_utils.py:59, under
        # `if is_torchvision_available():`): then risky
        entries=(Entry(command=VLLM_MODULE, run=API, static="risky"),),
        raising=Raising(
            file="vllm/inputs/registry.py",
            line=6,
            statement="from transformers import BatchFeature, PretrainedConfig, ProcessorMixin",
            exception="ModuleNotFoundError",
            message="Could not import module 'ProcessorMixin'",
            raised_in="transformers/utils/import_utils.py",
            raised_line=2048,
            raised_statement="raise ModuleNotFoundError(",
            cause="operator torchvision::nms does not exist",
            cause_in="torchvision/_meta_registrations.py",
            cause_line=163,
            cause_statement='@torch.library.register_fake("torchvision::nms")',
        ),
    ),
)
