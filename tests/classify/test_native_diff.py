"""`envsync diff` on the native layer's cases, each decided by the real loader first.

Every case is a pair of real venvs whose packages hold shared objects built here with the
system compiler; the service imports them. Before envsync runs, the target's interpreter
really imports the service (and must fail with the loader's message, or must work) and
the reference's must work. Then `diff` must name exactly what failed (the library, the
symbol or version) and the reference's provider, and nothing native where both load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from envsync.model.findings import PinFix, SyncDistFix
from tests.classify.nativebed import Bed, install, make_bed, native, real_import, venv
from tests.corpus import table
from tests.hostside.native.toolchain import EXT_SUFFIX, build, extension

OPS = f"kernel/ops{EXT_SUFFIX}"
APP = "from kernel import ops\n"
KERNEL_INIT = {"kernel/__init__.py": ""}

# c10::detail::f() and c10::detail::g(), as a C++ provider defines them
CXX_F_AND_G = "namespace c10 { namespace detail { int f() { return 1; } int g() { return 2; } } }\n"
CXX_ONLY_G = "namespace c10 { namespace detail { int g() { return 2; } } }\n"
USES_F = "extern int _ZN3c106detail1fEv(void);\nstatic long module_value(void) { return _ZN3c106detail1fEv(); }"


@dataclass(frozen=True)
class Expected:
    subject: str
    words: tuple[str, ...]  # each in the finding's reason
    fix: str | None  # the distribution the first fix moves back


def _kernel(bed: Bed, link: tuple[Path, ...], runpath: str, body: str = USES_F) -> Path:
    return extension(bed.folder / "build" / "kernel", "ops", body, link=link, runpath=runpath)


def dropped_symbol(bed: Bed) -> Expected:
    """The same kernel on both hosts, built against a provider whose v2 drops c10::detail::f()."""
    v1 = build(bed.folder / "v1" / "libc10.so", CXX_F_AND_G, soname="libc10.so", cxx=True)
    v2 = build(bed.folder / "v2" / "libc10.so", CXX_ONLY_G, soname="libc10.so", cxx=True)
    ops = _kernel(bed, (v1,), "$ORIGIN/../fakec10/lib")
    for site, lib, version in ((bed.ref_site, v1, "1.0"), (bed.tgt_site, v2, "2.0")):
        install(site, "fakec10", version, {"fakec10/__init__.py": "", "fakec10/lib/libc10.so": lib})
        install(site, "kernel", "1.0", {**KERNEL_INIT, OPS: ops})
        (site / "app.py").write_text(APP)
    return Expected(
        subject=OPS,
        words=(
            "`c10::detail::f()` (_ZN3c106detail1fEv)",
            "on the reference fakec10 1.0's libc10.so defines it",
            "importing kernel.ops (app → kernel.ops",
        ),
        fix="fakec10",
    )


VERS = "VERS_1 { global: f; local: *; };\nVERS_2 { global: g; } VERS_1;\n"
C_F_AND_G = "int f(void) { return 1; }\nint g(void) { return 2; }\n"
USES_G = "extern int g(void);\nstatic long module_value(void) { return g(); }"


def missing_version(bed: Bed) -> Expected:
    """A symbol-versioned provider whose older build lacks the version VERS_2."""
    new = build(
        bed.folder / "new" / "libp.so.1", C_F_AND_G, soname="libp.so.1", version_script=VERS
    )
    old = build(
        bed.folder / "old" / "libp.so.1",
        "int f(void) { return 1; }\n",
        soname="libp.so.1",
        version_script="VERS_1 { global: f; local: *; };\n",
    )
    ops = _kernel(bed, (new,), "$ORIGIN/../prov/lib", USES_G)
    for site, lib, version in ((bed.ref_site, new, "2.0"), (bed.tgt_site, old, "1.0")):
        install(site, "prov", version, {"prov/__init__.py": "", "prov/lib/libp.so.1": lib})
        install(site, "kernel", "1.0", {**KERNEL_INIT, OPS: ops})
        (site / "app.py").write_text(APP)
    return Expected(
        subject=OPS,
        words=(
            "needs version VERS_2 of libp.so.1",
            "on the reference prov 2.0's libp.so.1 defines VERS_2",
        ),
        fix="prov",
    )


def moved_runpath(bed: Bed) -> Expected:
    """$ORIGIN/lib: the target's build of the package keeps its library elsewhere."""
    lib = build(bed.folder / "lib" / "libp.so.1", C_F_AND_G, soname="libp.so.1")
    ops = _kernel(bed, (lib,), "$ORIGIN/lib", USES_G)
    install(bed.ref_site, "kernel", "1.0", {**KERNEL_INIT, OPS: ops, "kernel/lib/libp.so.1": lib})
    install(
        bed.tgt_site, "kernel", "1.0.post1", {**KERNEL_INIT, OPS: ops, "kernel/libs/libp.so.1": lib}
    )
    for site in (bed.ref_site, bed.tgt_site):
        (site / "app.py").write_text(APP)
    return Expected(
        subject=OPS,
        words=(
            "needs libp.so.1, which no search path provides",
            "on the reference kernel 1.0's libp.so.1 provides it",
        ),
        fix="kernel",
    )


def missing_soname(bed: Bed) -> Expected:
    """libcudart.so.12 (a stub with that soname): its distribution is missing on the target
    (this machine has CUDA 13's runtime in its ld.so cache, not 12's)."""
    cudart = build(bed.folder / "cuda" / "libcudart.so.12", C_F_AND_G, soname="libcudart.so.12")
    ops = _kernel(bed, (cudart,), "$ORIGIN/../nvidia/cuda_runtime/lib", USES_G)
    install(
        bed.ref_site,
        "nvidia-cuda-runtime-cu12",
        "12.8.90",
        {"nvidia/cuda_runtime/lib/libcudart.so.12": cudart},
    )
    for site in (bed.ref_site, bed.tgt_site):
        install(site, "kernel", "1.0", {**KERNEL_INIT, OPS: ops})
        (site / "app.py").write_text(APP)
    return Expected(
        subject=OPS,
        words=(
            "needs libcudart.so.12, which no search path provides",
            "on the reference nvidia-cuda-runtime-cu12 12.8.90's libcudart.so.12 provides it",
        ),
        fix="nvidia-cuda-runtime-cu12",
    )


def glibcxx_above_the_host(bed: Bed) -> Expected:
    """A kernel that needs GLIBCXX_3.4.99: the reference's build bundles a libstdc++ that
    defines it; the target's relies on the host's, which lacks it."""
    stub = build(
        bed.folder / "stub" / "libstdc++.so.6",
        "int envsync_future_cxx(void) { return 1; }\n",
        soname="libstdc++.so.6",
        version_script="GLIBCXX_3.4.99 { global: envsync_future_cxx; local: *; };\n",
    )
    body = "extern int envsync_future_cxx(void);\nstatic long module_value(void) { return envsync_future_cxx(); }"
    ops = _kernel(bed, (stub,), "$ORIGIN/../kernel.libs", body)
    install(
        bed.ref_site, "kernel", "1.0", {**KERNEL_INIT, OPS: ops, "kernel.libs/libstdc++.so.6": stub}
    )
    install(bed.tgt_site, "kernel", "1.0.post1", {**KERNEL_INIT, OPS: ops})
    for site in (bed.ref_site, bed.tgt_site):
        (site / "app.py").write_text(APP)
    return Expected(
        subject=OPS,
        words=(
            "needs version GLIBCXX_3.4.99 of libstdc++.so.6",
            "on the reference kernel 1.0's libstdc++.so.6 defines GLIBCXX_3.4.99",
        ),
        fix="kernel",
    )


TORCH_INIT = """import ctypes, os


def _load_global_deps():
    here = os.path.abspath(__file__)
    lib_path = os.path.join(os.path.dirname(here), "lib", "libtorch_global_deps.so")
    ctypes.CDLL(lib_path, mode=ctypes.RTLD_GLOBAL)


_load_global_deps()
from torch._C import *  # noqa
"""


def global_preload(bed: Bed) -> Expected:
    """torch's RTLD_GLOBAL preload: torch._C needs a symbol only libtorch_global_deps.so
    (loaded first, RTLD_GLOBAL) defines; the target's torch 2.0 dropped it."""
    deps_v1 = build(
        bed.folder / "v1" / "libtorch_global_deps.so",
        "int h_value(void) { return 7; }\n",
        soname="libtorch_global_deps.so",
    )
    deps_v2 = build(
        bed.folder / "v2" / "libtorch_global_deps.so",
        "int other(void) { return 0; }\n",
        soname="libtorch_global_deps.so",
    )
    c = extension(
        bed.folder / "build" / "torch",
        "_C",
        "extern int h_value(void);\nstatic long module_value(void) { return h_value(); }",
    )
    for site, deps, version in ((bed.ref_site, deps_v1, "1.0"), (bed.tgt_site, deps_v2, "2.0")):
        install(
            site,
            "torch",
            version,
            {
                "torch/__init__.py": TORCH_INIT,
                "torch/version.py": f"__version__ = {version!r}\ncuda = None\n",
                "torch/lib/libtorch_global_deps.so": deps,
                f"torch/_C{EXT_SUFFIX}": c,
            },
        )
        (site / "app.py").write_text("import torch\n")
    return Expected(
        subject=f"torch/_C{EXT_SUFFIX}",
        words=(
            "needs `h_value`",
            "on the reference torch 1.0's libtorch_global_deps.so defines it",
            "importing torch._C (app → torch",
        ),
        fix="torch",
    )


CASES: dict[str, Callable[[Bed], Expected]] = {
    "dropped-symbol": dropped_symbol,
    "missing-version": missing_version,
    "origin-runpath": moved_runpath,
    "missing-soname": missing_soname,
    "glibcxx": glibcxx_above_the_host,
    "rtld-global-preload": global_preload,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_diff_names_what_the_loader_refuses(tmp_path: Path, case: str) -> None:
    bed = make_bed(tmp_path)
    venv(bed.ref), venv(bed.tgt)
    expected = CASES[case](bed)
    # the ground truth first: the reference imports the service, the target cannot
    assert real_import(bed.ref) is None
    real = real_import(bed.tgt)
    assert real is not None and (":" in real), real

    report = bed.diff()
    found = native(report)
    assert [f.subject for f in found] == [expected.subject], report.findings
    finding = found[0]
    assert finding.severity == "fatal" and finding.decided_by == "native"
    assert finding.evidence[0].detail == real  # the loader's own message, word for word
    for words in expected.words:
        assert words in finding.reason, finding.reason
    assert finding.fixes, finding.fixes
    fix = finding.fixes[0]
    assert isinstance(fix, (PinFix, SyncDistFix)) and fix.dist == expected.fix, finding.fixes
    # one story: the provider the fatal finding names is never benign beside it (issue 31;
    # a missing nvidia-cuda-runtime-cu12 was "no import path from startup reaches it")
    (provider,) = [f for f in report.findings if f.subject == expected.fix]
    assert provider.severity != "benign", provider
    if provider.kind == "missing":
        assert provider.severity == "fatal" and OPS.rpartition("/")[2] in provider.reason
    table.record(
        f"native-{case}",
        report="the native layer: a shared object the loader refuses on the target",
        culprit=finding.subject,
        reference=table.outcome(None),
        target=table.outcome(real),
        static=finding.severity,
        import_check=None,
        expected="fatal",
        test=table.current_test(),
    )


def test_the_import_check_attaches_the_loaders_message(tmp_path: Path) -> None:
    bed = make_bed(tmp_path)
    venv(bed.ref), venv(bed.tgt)
    dropped_symbol(bed)
    real = real_import(bed.tgt)
    (finding,) = native(bed.diff(import_check=True))
    assert finding.severity == "fatal" and finding.decided_by == "import-check"
    assert finding.evidence[0].source == "import-check"
    assert finding.evidence[0].detail == f"import app: ImportError: {real}"


def test_nothing_native_where_both_load(tmp_path: Path) -> None:
    """Another provider version that still defines what the kernel needs: no finding."""
    bed = make_bed(tmp_path)
    venv(bed.ref), venv(bed.tgt)
    v1 = build(tmp_path / "v1" / "libc10.so", CXX_F_AND_G, soname="libc10.so", cxx=True)
    v2 = build(
        tmp_path / "v2" / "libc10.so",
        CXX_F_AND_G + "namespace c10 { int h() { return 3; } }\n",
        soname="libc10.so",
        cxx=True,
    )
    ops = _kernel(bed, (v1,), "$ORIGIN/../fakec10/lib")
    for site, lib, version in ((bed.ref_site, v1, "1.0"), (bed.tgt_site, v2, "2.0")):
        install(site, "fakec10", version, {"fakec10/__init__.py": "", "fakec10/lib/libc10.so": lib})
        install(site, "kernel", "1.0", {**KERNEL_INIT, OPS: ops})
        (site / "app.py").write_text(APP)
    ref, tgt = real_import(bed.ref), real_import(bed.tgt)
    assert ref is None and tgt is None
    report = bed.diff()
    assert native(report) == []
    (provider,) = [f for f in report.findings if f.subject == "fakec10"]
    # startup loads fakec10's libc10.so through the kernel: used, so never benign
    assert provider.severity == "risky", provider
    table.record(
        "native-both-load",
        report="the native layer, negative control: another provider that still defines "
        "what the kernel needs",
        culprit="fakec10",
        reference=table.outcome(ref),
        target=table.outcome(tgt),
        static=provider.severity,
        import_check=None,
        expected="risky",
        test=table.current_test(),
    )


def test_repair_plans_the_providers_fix(tmp_path: Path) -> None:
    """The native finding's fix is typed: `repair` plans it (the provider back to 1.0)."""
    from envsync.repair.plan import make_plan
    from envsync.repair.steps.pin import PinStep
    from envsync.repair.steps.sync_dist import SyncDistStep

    bed = make_bed(tmp_path)
    venv(bed.ref), venv(bed.tgt)
    dropped_symbol(bed)
    comparison = bed.compare()
    plan = make_plan(comparison.report, comparison.reference, comparison.snapshot)
    native_subject = f"kernel/ops{EXT_SUFFIX}"
    (step,) = [s for s in plan.steps if native_subject in s.findings]
    assert isinstance(step, (PinStep, SyncDistStep)), step
    assert "fakec10" in step.dists, step


def test_the_services_ld_library_path_is_the_loaders(tmp_path: Path) -> None:
    """The reference's service finds the library through its LD_LIBRARY_PATH (the
    inventory's service env), as the real loader does there; the target's has none."""
    bed = make_bed(tmp_path)
    venv(bed.ref), venv(bed.tgt)
    lib = build(tmp_path / "extra" / "libp.so.1", C_F_AND_G, soname="libp.so.1")
    ops = _kernel(bed, (lib,), "$ORIGIN/lib", USES_G)
    for site in (bed.ref_site, bed.tgt_site):
        install(site, "kernel", "1.0", {**KERNEL_INIT, OPS: ops})
        (site / "app.py").write_text(APP)
    extra = str(tmp_path / "extra")
    assert real_import(bed.ref, env={"LD_LIBRARY_PATH": extra}) is None
    real = real_import(bed.tgt)
    assert real == "libp.so.1: cannot open shared object file: No such file or directory"
    inventory = bed.inventory()
    service = f'service = {{ env = {{ LD_LIBRARY_PATH = "{extra}" }} }}\n'
    inventory.write_text(inventory.read_text().replace("[hosts.ref]\n", "[hosts.ref]\n" + service))
    (finding,) = native(bed.diff(inventory=inventory))
    assert finding.severity == "fatal" and finding.evidence[0].detail == real
    assert f"on the reference {extra}/libp.so.1 provides it" in finding.reason
