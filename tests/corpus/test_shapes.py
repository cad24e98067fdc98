"""A changed version that startup imports unguarded, and a provider beside its own fatal
(issue 31, shapes 2 and 3), on real wheels, each case from a public report.

Shape 2: a distribution whose version differs and which startup imports at module level,
outside any guard, is never `degraded` or `benign` (claims that startup works).

- TMElyralab/MuseTalk#265 (the same traceback in kijai/ComfyUI-HunyuanVideoWrapper#246,
  mit-han-lab/distrifuser#24): `from diffusers import AutoencoderKL` (musetalk/models/
  vae.py:1) dies in diffusers/__init__.py:5 → diffusers/utils/__init__.py:38 →
  diffusers/utils/dynamic_modules_utils.py:28, `from huggingface_hub import
  cached_download, hf_hub_download, model_info`: "ImportError: cannot import name
  'cached_download' from 'huggingface_hub'". huggingface_hub 0.26.0 dropped
  `cached_download` (its `_SUBMOD_ATTRS` no longer names it); diffusers 0.27.2 requires
  `huggingface-hub>=0.20.2`, so `pip check` is silent. Downgrading to 0.25.2 fixed it.
  Statically envsync cannot show the name absent (huggingface_hub/__init__.py:570 hands
  `_attach` its table by name, `submod_attrs=_SUBMOD_ATTRS`, which it does not read as
  complete): the verdict rests on the unguarded import alone, `risky`, never lower; the
  import check's real import makes it `fatal`, with the exception and its frame (line 28).
- The same, the service also guarding `cached_download` (the pattern of the shims in
  easydiffusion/easydiffusion#1851 and xinntao/Real-ESRGAN#887) from the module that
  defined it, huggingface_hub/file_download.py, which envsync reads: the one break it can
  read is guarded (`degraded` before issue 31); the unguarded import keeps it `risky`.
- The same import beside huggingface_hub 0.25.2 where the reference has 0.24.7 (both
  define `cached_download`): the same kind of difference, which really starts.

Shape 3: an extension whose needed soname is gone, the `native` finding fatal and naming
the reference's provider distribution; that distribution, missing on the target, is never
`benign` beside it.

- aws/deep-learning-containers#6770: flash-attn 2.8.3's extension links libcudart.so.12,
  no distribution provides it in the image, `import flash_attn` fails with "ImportError:
  libcudart.so.12: cannot open shared object file"; installing nvidia-cuda-runtime-cu12
  makes it import (the same loss by an uninstall of the nvidia-*-cu12 distributions in
  sgl-project/sglang PR #31035). No small public wheel links libcudart.so.12, so the
  extension is built here with the system compiler, laid out as flash-attn's (a top-level
  extension module that the package's interface module imports at module level), linked
  against the real libcudart.so.12 of the real nvidia-cuda-runtime-cu12 12.8.90 wheel, its
  RUNPATH `$ORIGIN/nvidia/cuda_runtime/lib`, where that wheel puts it.
- The same extension beside nvidia-cuda-runtime-cu12 12.4.127 where the reference has
  12.8.90: the provider differs and still provides the soname, and it loads.

A real import decides first, on both venvs; then envsync, statically and with
--import-check: fatal only where the real import breaks, with its exception, and no
verdict of the changed distribution below `risky` where startup imports or loads it.
The counts go to the reliability figures.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from envsync.cli import main
from tests.corpus import table
from tests.figures import add
from tests.helpers import fetch, make_venv, make_wheel, pip_install, site_packages
from tests.hostside.native.toolchain import EXT_SUFFIX, extension

pytestmark = pytest.mark.slow

SECTION = "unguarded changes and providers (real wheels, a real import decides)"

# what diffusers 0.27.2 and huggingface_hub import while `import diffusers` runs
HUB_STACK = (
    "diffusers==0.27.2",
    "filelock==4.3.1",
    "fsspec==2026.9.0",
    "packaging==26.4",
    "pyyaml==6.0.4",
    "requests==2.34.2",
    "urllib3==2.8.0",
    "idna==3.20",
    "certifi==2026.10.19.post1",
    "charset-normalizer==3.5.3",
    "tqdm==4.70.1",
    "typing-extensions==4.16.0",
    "numpy==2.2.6",
    "pillow==13.0.0",
    "regex==2026.11.19",
    "safetensors==0.8.0",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    report: str  # the public report
    service: str  # svc/main.py: the statement the report's service runs
    same: tuple[str, ...]  # on both hosts
    reference: str  # the culprit on the reference (NAME==VERSION)
    target: str  # and on the target
    raises: str | None = None  # how the last line a real import on the target ends begins
    # the raising frame: file under site-packages, line, the statement there
    raised_in: tuple[str, int, str] = ("", 0, "")
    static: str = "risky"  # the culprit's severity without the import check
    guarded: bool = False  # the service also imports a name the target lacks, guarded


# a guarded import of what huggingface_hub 0.26.0 dropped, from the module that defined it
# (huggingface_hub/file_download.py:579 in 0.25.2), whose names envsync reads
GUARDED = """\
try:
    from huggingface_hub.file_download import cached_download
except ImportError:
    cached_download = None
"""

CASES = (
    Case(
        id="diffusers-hub-0.26",
        report="TMElyralab/MuseTalk#265",
        service="from diffusers import AutoencoderKL  # musetalk/models/vae.py:1\n",
        same=HUB_STACK,
        reference="huggingface_hub==0.25.2",
        target="huggingface_hub==0.26.0",
        raises="ImportError: cannot import name 'cached_download' from 'huggingface_hub'",
        raised_in=(
            "diffusers/utils/dynamic_modules_utils.py",
            28,
            "from huggingface_hub import cached_download, hf_hub_download, model_info",
        ),
        # huggingface_hub/__init__.py:570 exports its names through
        # `_attach(__name__, submodules=[], submod_attrs=_SUBMOD_ATTRS)`, a table passed
        # by name: envsync does not read it as complete, so cannot show the name absent
        static="risky",
    ),
    Case(
        id="diffusers-hub-0.26-guarded-too",
        report="TMElyralab/MuseTalk#265, the service also guarding cached_download as the "
        "shims of easydiffusion/easydiffusion#1851 and xinntao/Real-ESRGAN#887 do",
        service=GUARDED + "from diffusers import AutoencoderKL  # musetalk/models/vae.py:1\n",
        same=HUB_STACK,
        reference="huggingface_hub==0.25.2",
        target="huggingface_hub==0.26.0",
        raises="ImportError: cannot import name 'cached_download' from 'huggingface_hub'",
        raised_in=(
            "diffusers/utils/dynamic_modules_utils.py",
            28,
            "from huggingface_hub import cached_download, hf_hub_download, model_info",
        ),
        # the guarded break is the only one read (file_download.py binds its names):
        # `degraded` before issue 31; the unguarded import keeps it `risky`
        static="risky",
        guarded=True,
    ),
    Case(
        id="diffusers-hub-0.25-kept",
        report="TMElyralab/MuseTalk#265, a huggingface_hub that still has cached_download",
        service="from diffusers import AutoencoderKL  # musetalk/models/vae.py:1\n",
        same=HUB_STACK,
        reference="huggingface_hub==0.24.7",
        target="huggingface_hub==0.25.2",
    ),
)


def _really_imports(python: Path) -> str | None:
    done = subprocess.run(
        [str(python), "-W", "ignore", "-c", "import svc.main"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return None if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def _inventory(root: Path) -> None:
    (root / "envsync.toml").write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{root / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{root / "tgt" / "bin" / "python"}"\n'
    )


def _service(root: Path, text: str) -> Path:
    return make_wheel(root / "wheels", "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": text})


def _diff(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> dict[str, dict]:
    code = main(
        ["--inventory", str(root / "envsync.toml"), "-q", "diff", "--format", "json", *extra]
    )
    assert code == 1
    return {f["subject"]: f for f in json.loads(capsys.readouterr().out)["findings"]}


# ---------------------------------------------------------------------------------------
# Shape 2: a changed version imported at module level


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.id)
def pair(
    request: pytest.FixtureRequest, wheel_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Case, Path]:
    case: Case = request.param
    root = tmp_path_factory.mktemp(case.id)
    svc = _service(root, case.service)
    same = [fetch(wheel_cache, r) for r in case.same]
    for side, culprit in (("ref", case.reference), ("tgt", case.target)):
        pip_install(make_venv(root / side), svc, *same, fetch(wheel_cache, culprit))
    _inventory(root)
    return case, root


def _culprit(case: Case) -> str:
    return case.target.partition("==")[0].replace("_", "-")


def test_a_real_import_decides_first(pair: tuple[Case, Path]) -> None:
    case, root = pair
    ref = _really_imports(root / "ref" / "bin" / "python")
    assert ref is None
    real = _really_imports(root / "tgt" / "bin" / "python")
    table.part(
        case.id,
        report=case.report,
        culprit=_culprit(case),
        reference=table.outcome(ref),
        target=table.outcome(real),
        expected="fatal" if case.raises else table.NOT_FATAL,
        test="tests/corpus/test_shapes.py",
    )
    if case.raises is None:
        assert real is None
        return
    assert real is not None and real.startswith(case.raises), real
    # the wheels say so: diffusers imports the name at module level, outside any guard;
    # the reference's huggingface_hub exports it, the target's does not
    file, line, statement = case.raised_in
    site = site_packages(root / "tgt" / "bin" / "python")
    assert (site / file).read_text().splitlines()[line - 1] == statement
    for side, has in (("ref", True), ("tgt", False)):
        init = site_packages(root / side / "bin" / "python") / "huggingface_hub" / "__init__.py"
        assert ('"cached_download",' in init.read_text()) is has


def test_the_static_verdict_is_never_below_risky(
    pair: tuple[Case, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    case, root = pair
    found = _diff(capsys, root)
    assert set(found) == {_culprit(case)}, found
    culprit = found[_culprit(case)]
    table.part(case.id, static=culprit["severity"])
    # imported unguarded at module level: never degraded or benign, whatever else is read
    assert culprit["severity"] == case.static, culprit
    if case.guarded:
        # the guarded break is read, and is evidence; the unguarded import decides
        assert culprit["decided_by"] == "import-graph", culprit
        assert "unguarded" in culprit["reason"] and "so not degraded" in culprit["reason"]
        (read,) = [e for e in culprit["evidence"] if e["source"] == "name-check" and e["line"]]
        assert (read["file"].endswith("svc/main.py"), read["line"]) == (True, 2), read
        add(SECTION, "a guarded name gone and an unguarded import unread: risky, not degraded")
        return
    assert "startup imports it" in culprit["reason"], culprit["reason"]
    assert "not shown to break" in culprit["reason"], culprit["reason"]
    (used,) = [e for e in culprit["evidence"] if e["source"] == "import-graph"]
    assert used["context"] == "module", used
    breaks = "breaks" if case.raises else "imports cleanly"
    add(SECTION, f"a changed version startup imports unguarded, {breaks}, read: risky")


def test_the_import_check_is_fatal_only_where_the_import_breaks(
    pair: tuple[Case, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    case, root = pair
    real = _really_imports(root / "tgt" / "bin" / "python")
    found = _diff(capsys, root, "--import-check")
    culprit = found[_culprit(case)]
    table.part(case.id, import_check=culprit["severity"])
    if case.raises is None:
        assert all(f["severity"] != "fatal" for f in found.values()), found
        add(SECTION, "a changed version imported unguarded, imports cleanly: not fatal")
        return
    assert culprit["severity"] == "fatal", culprit
    (checked,) = [e for e in culprit["evidence"] if e["source"] == "import-check"]
    assert checked["detail"] == f"import svc.main: {real}", checked
    file, line, statement = case.raised_in
    assert checked["file"].endswith(file) and checked["line"] == line, checked
    assert checked["statement"] == statement, checked
    add(SECTION, "a changed version imported unguarded, a real import breaks: fatal")


# ---------------------------------------------------------------------------------------
# Shape 3: the provider of a soname an extension needs


@dataclass(frozen=True, slots=True, kw_only=True)
class Provided:
    id: str
    report: str
    built_against: str  # the provider whose library the extension is linked against
    reference: str  # the provider on the reference (NAME==VERSION)
    target: str | None  # and on the target (None: missing)
    raises: str | None = None  # the last line a real import on the target ends with


PROVIDER = "nvidia-cuda-runtime-cu12"
LIBRARY = "nvidia/cuda_runtime/lib/libcudart.so.12"  # in the provider's wheel
EXTENSION = f"attn_kernel_cuda{EXT_SUFFIX}"  # top-level, as flash-attn's flash_attn_2_cuda
PROVIDED = (
    Provided(
        id="cudart-12-missing",
        report="aws/deep-learning-containers#6770",
        built_against=f"{PROVIDER}==12.8.90",
        reference=f"{PROVIDER}==12.8.90",
        target=None,
        raises="ImportError: libcudart.so.12: cannot open shared object file: "
        "No such file or directory",
    ),
    Provided(
        id="cudart-12-other-version",
        report="aws/deep-learning-containers#6770, another CUDA 12 runtime that provides it",
        built_against=f"{PROVIDER}==12.8.90",
        reference=f"{PROVIDER}==12.8.90",
        target=f"{PROVIDER}==12.4.127",
    ),
)
# the extension calls the runtime (only when asked: importing it runs nothing of CUDA's)
USES_CUDART = (
    "extern int cudaRuntimeGetVersion(int *version);\n"
    "static long module_value(void) { int v = 0; cudaRuntimeGetVersion(&v); return v; }"
)
KERNEL = {
    "attn_kernel/__init__.py": "from attn_kernel.interface import attn_func\n",
    # flash_attn/flash_attn_interface.py: `import flash_attn_2_cuda as flash_attn_cuda`
    "attn_kernel/interface.py": "import attn_kernel_cuda as kernel_cuda\n\n\n"
    "def attn_func():\n    return kernel_cuda.value()\n",
}


@pytest.fixture(scope="module", params=PROVIDED, ids=lambda c: c.id)
def provided(
    request: pytest.FixtureRequest, wheel_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Provided, Path]:
    case: Provided = request.param
    root = tmp_path_factory.mktemp(case.id)
    link = root / "link" / "libcudart.so.12"
    link.parent.mkdir()
    with zipfile.ZipFile(fetch(wheel_cache, case.built_against)) as zf:
        link.write_bytes(zf.read(LIBRARY))
    ops = extension(
        root / "build",
        "attn_kernel_cuda",
        USES_CUDART,
        link=(link,),
        runpath="$ORIGIN/nvidia/cuda_runtime/lib",
    )
    files: dict[str, str | bytes] = {**KERNEL, EXTENSION: ops.read_bytes()}
    kernel = make_wheel(
        root / "wheels", "attn-kernel", "1.0", files, top_level=("attn_kernel", "attn_kernel_cuda")
    )
    svc = _service(root, "from attn_kernel import attn_func\n")
    for side, provider in (("ref", case.reference), ("tgt", case.target)):
        wheels = [svc, kernel] + ([fetch(wheel_cache, provider)] if provider else [])
        pip_install(make_venv(root / side), *wheels)
    _inventory(root)
    return case, root


def test_a_real_import_decides_first_on_the_provider(provided: tuple[Provided, Path]) -> None:
    case, root = provided
    ref, tgt = (_really_imports(root / side / "bin" / "python") for side in ("ref", "tgt"))
    assert ref is None
    assert tgt == case.raises
    table.part(
        case.id,
        report=case.report,
        culprit=PROVIDER,
        reference=table.outcome(ref),
        target=table.outcome(tgt),
        expected="fatal" if case.raises else table.NOT_FATAL,
        test="tests/corpus/test_shapes.py",
    )
    # the extension needs the soname; the reference's provider holds it, by its RECORD
    needed = subprocess.run(
        ["readelf", "-d", str(site_packages(root / "ref" / "bin" / "python") / EXTENSION)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Shared library: [libcudart.so.12]" in needed, needed
    assert "Library runpath: [$ORIGIN/nvidia/cuda_runtime/lib]" in needed, needed
    site = site_packages(root / "ref" / "bin" / "python")
    version = case.reference.partition("==")[2]
    record = site / f"nvidia_cuda_runtime_cu12-{version}.dist-info" / "RECORD"
    assert f"{LIBRARY}," in record.read_text()


def test_the_provider_is_never_benign_beside_its_fatal(
    provided: tuple[Provided, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    case, root = provided
    found = _diff(capsys, root)
    provider = found[PROVIDER]
    table.part(case.id, static=provider["severity"])
    if case.raises is None:
        # loads on both: nothing native; the provider startup loads is used, so risky
        assert set(found) == {PROVIDER}, found
        assert provider["severity"] == "risky", provider
        assert "startup loads its libcudart.so.12" in provider["reason"], provider["reason"]
        add(SECTION, "a provider that differs and still provides the soname: risky")
        return
    assert set(found) == {EXTENSION, PROVIDER}, found
    native = found[EXTENSION]
    assert (native["severity"], native["decided_by"]) == ("fatal", "native"), native
    assert native["evidence"][0]["detail"] == case.raises.removeprefix("ImportError: ")
    version = case.reference.partition("==")[2]
    for words in (
        "needs libcudart.so.12, which no search path provides",
        f"on the reference {PROVIDER} {version}'s libcudart.so.12 provides it",
    ):
        assert words in native["reason"], native["reason"]
    assert native["fixes"][0]["dist"] == PROVIDER, native["fixes"]
    # one story: the distribution the fatal finding names is fatal with it, never benign
    assert (provider["kind"], provider["severity"]) == ("missing", "fatal"), provider
    assert f"the native finding {EXTENSION} (fatal) needs it" in provider["reason"]
    add(SECTION, "a provider missing beside its fatal native finding: fatal, never benign")


def test_the_import_check_is_fatal_only_where_the_load_breaks(
    provided: tuple[Provided, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    case, root = provided
    found = _diff(capsys, root, "--import-check")
    if PROVIDER in found:
        table.part(case.id, import_check=found[PROVIDER]["severity"])
    if case.raises is None:
        assert all(f["severity"] != "fatal" for f in found.values()), found
        add(SECTION, "a provider that differs, the extension loads: not fatal")
        return
    native = found[EXTENSION]
    assert (native["severity"], native["decided_by"]) == ("fatal", "import-check"), native
    assert native["evidence"][0]["detail"] == f"import svc.main: {case.raises}"
    assert found[PROVIDER]["severity"] == "fatal", found[PROVIDER]
    add(SECTION, "a provider missing, a real import breaks: fatal")
