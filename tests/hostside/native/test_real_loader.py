"""The native layer against the real loader: each case built with the system compiler, loaded
for real in a fresh interpreter (the ground truth, asserted first), then judged statically;
the failing symbol, library and version must be the loader's, word for word."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from envsync.hostside.native.loader import Environment, Linker
from envsync.hostside.native.verdicts import Fails, NotFound, UndefinedSymbol, VersionNotFound
from tests.hostside.native.toolchain import (
    build,
    build_32,
    extension,
    facts,
    message,
    real_import,
    real_load,
    static_load,
    system_cache,
)

F_AND_G = "int f(void) { return 1; }\nint g(void) { return 2; }\n"
ONLY_F = "int f(void) { return 1; }\n"
USES_G = "extern int g(void);\nint use_g(void) { return g(); }\n"


def provider_and_consumer(tmp_path: Path, provider: str = F_AND_G) -> tuple[Path, Path]:
    """a/lib/libp.so.1 and a/libconsumer.so, which needs g from it through $ORIGIN/lib."""
    lib = build(tmp_path / "a" / "lib" / "libp.so.1", provider, soname="libp.so.1")
    consumer = build(tmp_path / "a" / "libconsumer.so", USES_G, link=(lib,), runpath="$ORIGIN/lib")
    return lib, consumer


def test_a_a_provider_that_drops_a_symbol(tmp_path: Path) -> None:
    lib, consumer = provider_and_consumer(tmp_path)
    assert real_load(consumer) is None
    assert message(static_load(consumer)) is None

    build(lib, ONLY_F, soname="libp.so.1")  # v2 of the provider: g is gone
    real = real_load(consumer)
    assert real == f"{consumer}: undefined symbol: g"
    load = static_load(consumer)
    assert message(load) == real
    assert isinstance(load.verdict, Fails), load.verdict
    reason = load.verdict.reasons[0]
    assert isinstance(reason, UndefinedSymbol)
    assert (reason.symbol, reason.needed_by, reason.version) == ("g", str(consumer), None)
    assert str(lib) in reason.searched  # the provider was in the lookup scope


VERS_1_AND_2 = "VERS_1 { global: f; local: *; };\nVERS_2 { global: g; } VERS_1;\n"


def test_b_a_symbol_version_the_old_provider_lacks(tmp_path: Path) -> None:
    lib = build(
        tmp_path / "a" / "lib" / "libp.so.1",
        F_AND_G,
        soname="libp.so.1",
        version_script=VERS_1_AND_2,
    )
    consumer = build(tmp_path / "a" / "libconsumer.so", USES_G, link=(lib,), runpath="$ORIGIN/lib")
    assert real_load(consumer) is None
    assert message(static_load(consumer)) is None

    old = "VERS_1 { global: f; local: *; };\n"
    build(lib, ONLY_F, soname="libp.so.1", version_script=old)
    real = real_load(consumer)
    assert real == f"{lib}: version `VERS_2' not found (required by {consumer})"
    load = static_load(consumer)
    assert message(load) == real
    assert isinstance(load.verdict, Fails), load.verdict
    reason = load.verdict.reasons[0]
    assert isinstance(reason, VersionNotFound)
    assert (reason.version, reason.file, reason.provider) == ("VERS_2", "libp.so.1", str(lib))


def test_b_the_version_is_there_but_not_the_symbol_at_it(tmp_path: Path) -> None:
    lib = build(
        tmp_path / "a" / "lib" / "libp.so.1",
        F_AND_G,
        soname="libp.so.1",
        version_script=VERS_1_AND_2,
    )
    consumer = build(tmp_path / "a" / "libconsumer.so", USES_G, link=(lib,), runpath="$ORIGIN/lib")
    # g moved back to VERS_1; VERS_2 still exists (it defines h now)
    moved = "VERS_1 { global: f; g; local: *; };\nVERS_2 { global: h; } VERS_1;\n"
    build(lib, F_AND_G + "int h(void) { return 3; }\n", soname="libp.so.1", version_script=moved)
    real = real_load(consumer)
    assert real == f"{consumer}: undefined symbol: g, version VERS_2"
    assert message(static_load(consumer)) == real


def test_c_origin_runpath_and_a_moved_provider(tmp_path: Path) -> None:
    lib, consumer = provider_and_consumer(tmp_path)
    assert real_load(consumer) is None
    load = static_load(consumer)
    assert message(load) is None
    assert any(s.path == str(lib) and s.how.startswith("RUNPATH of") for s in load.steps)

    lib.rename(tmp_path / "libp.so.1")  # moved out of $ORIGIN/lib
    real = real_load(consumer)
    assert real == "libp.so.1: cannot open shared object file: No such file or directory"
    load = static_load(consumer)
    assert message(load) == real
    assert isinstance(load.verdict, Fails), load.verdict
    reason = load.verdict.reasons[0]
    assert isinstance(reason, NotFound)
    assert reason.searched[0] == f"RUNPATH of {consumer}: {tmp_path}/a/lib"


@pytest.mark.parametrize("inherited", [True, False], ids=["rpath", "runpath"])
def test_c_rpath_is_inherited_runpath_is_not(tmp_path: Path, inherited: bool) -> None:
    """a/liba.so (its path: $ORIGIN/lib) needs lib/libb.so, which needs lib/libc2.so and has
    no path of its own: only a DT_RPATH of liba.so serves libb.so's needs too."""
    libc2 = build(tmp_path / "a" / "lib" / "libc2.so", ONLY_F, soname="libc2.so")
    libb = build(
        tmp_path / "a" / "lib" / "libb.so",
        "extern int f(void);\nint b(void) { return f(); }\n",
        soname="libb.so",
        link=(libc2,),
    )
    paths = {"rpath": "$ORIGIN/lib"} if inherited else {"runpath": "$ORIGIN/lib"}
    liba = build(
        tmp_path / "a" / "liba.so",
        "extern int b(void);\nint a(void) { return b(); }\n",
        link=(libb,),
        **paths,  # type: ignore[arg-type]  # paths holds rpath or runpath (str), which build() takes among parameters of other types
    )
    real = real_load(liba)
    if inherited:
        assert real is None
    else:
        assert real == "libc2.so: cannot open shared object file: No such file or directory"
    assert message(static_load(liba)) == real


def test_d_a_missing_soname(tmp_path: Path) -> None:
    gone = build(tmp_path / "stub" / "libnothere.so.7", ONLY_F, soname="libnothere.so.7")
    consumer = build(
        tmp_path / "libconsumer.so",
        "extern int f(void);\nint use(void) { return f(); }\n",
        link=(gone,),
    )
    gone.unlink()
    real = real_load(consumer)
    assert real == "libnothere.so.7: cannot open shared object file: No such file or directory"
    load = static_load(consumer)
    assert message(load) == real
    assert isinstance(load.verdict, Fails), load.verdict
    reason = load.verdict.reasons[0]
    assert isinstance(reason, NotFound) and reason.needed_by == str(consumer)
    assert reason.searched[-2:][0] == "ld.so.cache"


def test_e_a_libstdcxx_version_above_the_hosts(tmp_path: Path) -> None:
    """Linked against a stub libstdc++.so.6 that defines GLIBCXX_3.4.99 (as a wheel built
    with a newer GCC needs GLIBCXX_3.4.32); the host's own libstdc++ lacks it."""
    stub = build(
        tmp_path / "stub" / "libstdc++.so.6",
        "int envsync_future_cxx(void) { return 1; }\n",
        soname="libstdc++.so.6",
        version_script="GLIBCXX_3.4.99 { global: envsync_future_cxx; local: *; };\n",
    )
    consumer = build(
        tmp_path / "libneeds_new_cxx.so",
        "extern int envsync_future_cxx(void);\nint use(void) { return envsync_future_cxx(); }\n",
        link=(stub,),
    )
    real = real_load(consumer)
    assert real is not None and real.endswith(
        f"libstdc++.so.6: version `GLIBCXX_3.4.99' not found (required by {consumer})"
    )
    load = static_load(consumer)
    assert message(load) == real  # the host's libstdc++, found where ld.so finds it
    assert isinstance(load.verdict, Fails), load.verdict
    reason = load.verdict.reasons[0]
    assert isinstance(reason, VersionNotFound) and reason.version == "GLIBCXX_3.4.99"


def interpreters() -> list[tuple[str, str]]:
    """(python, its headers): this one (libpython3.X.so beside it), and Debian's own, whose
    executable holds libpython and exports its symbols, when it is here."""
    found = [(sys.executable, sysconfig.get_paths()["include"])]
    system = Path("/usr/bin/python3.11")
    if (
        system.exists()
        and sys.version_info[:2] == (3, 11)
        and Path("/usr/include/python3.11/Python.h").exists()
    ):
        found.append((str(system), "/usr/include/python3.11"))
    return found


@pytest.mark.parametrize(
    ("python", "include"),
    interpreters(),
    ids=["this-python", "debian-python"][: len(interpreters())],
)
def test_f_a_python_extension_whose_provider_breaks(
    tmp_path: Path, python: str, include: str
) -> None:
    pkg = tmp_path / "site"
    lib = build(pkg / "lib" / "libp.so.1", "int p_value(void) { return 42; }\n", soname="libp.so.1")
    ext = extension(
        pkg,
        "native_mod",
        "extern int p_value(void);\nstatic long module_value(void) { return p_value(); }",
        include=include,
        link=(lib,),
        runpath="$ORIGIN/lib",
    )
    assert real_import("native_mod", pkg, python=python) is None
    # the Py* symbols come from the interpreter's global scope (its executable or libpython)
    assert message(static_load(ext, python=python)) is None

    build(lib, "int p_other(void) { return 0; }\n", soname="libp.so.1")
    real = real_import("native_mod", pkg, python=python)
    assert real == f"{ext}: undefined symbol: p_value"
    assert message(static_load(ext, python=python)) == real


def test_f_an_extension_of_another_python_misses_its_symbols(tmp_path: Path) -> None:
    """An extension using a symbol only a newer libpython has fails on this one."""
    ext = extension(
        tmp_path / "site",
        "newer_mod",
        "extern long PyEnvsync_OnlyInAFuturePython(void);\n"
        "static long module_value(void) { return PyEnvsync_OnlyInAFuturePython(); }",
    )
    real = real_import("newer_mod", tmp_path / "site")
    assert real == f"{ext}: undefined symbol: PyEnvsync_OnlyInAFuturePython"
    assert message(static_load(ext)) == real


def test_g_a_symbol_only_a_globally_loaded_library_provides(tmp_path: Path) -> None:
    libh = build(tmp_path / "libh.so", "int h_value(void) { return 7; }\n", soname="libh.so")
    ext = extension(
        tmp_path / "site",
        "needs_h",
        "extern int h_value(void);\nstatic long module_value(void) { return h_value(); }",
    )
    assert real_import("needs_h", tmp_path / "site", global_=(libh,)) is None
    assert message(static_load(ext, global_=(libh,))) is None

    real = real_import("needs_h", tmp_path / "site")
    assert real == f"{ext}: undefined symbol: h_value"
    assert message(static_load(ext)) == real
    # loaded before, but RTLD_LOCAL: in the process, not in the lookup scope
    assert real_load(ext, local=(libh,)) == real
    assert message(static_load(ext, local=(libh,))) == real


def test_a_loaded_soname_satisfies_a_need_no_search_finds(tmp_path: Path) -> None:
    libh = build(
        tmp_path / "hidden" / "libh.so", "int h_value(void) { return 7; }\n", soname="libh.so"
    )
    consumer = build(
        tmp_path / "libconsumer.so",
        "extern int h_value(void);\nint use(void) { return h_value(); }\n",
        link=(libh,),
    )
    real = real_load(consumer)
    assert real == "libh.so: cannot open shared object file: No such file or directory"
    assert message(static_load(consumer)) == real
    assert real_load(consumer, local=(libh,)) is None  # already loaded: found by its soname
    assert message(static_load(consumer, local=(libh,))) is None


@pytest.mark.parametrize("kind", ["runpath", "rpath"])
def test_ld_library_path_comes_after_rpath_before_runpath(tmp_path: Path, kind: str) -> None:
    good = build(tmp_path / "good" / "libp.so.1", F_AND_G, soname="libp.so.1")
    build(tmp_path / "bad" / "libp.so.1", ONLY_F, soname="libp.so.1")
    paths = {kind: str(tmp_path / "good")}
    consumer = build(tmp_path / "libconsumer.so", USES_G, link=(good,), **paths)  # type: ignore[arg-type]  # paths holds rpath or runpath (str), which build() takes among parameters of other types
    env = {"LD_LIBRARY_PATH": str(tmp_path / "bad")}
    real = real_load(consumer, env=env)
    assert real == (f"{consumer}: undefined symbol: g" if kind == "runpath" else None)
    assert message(static_load(consumer, library_path=str(tmp_path / "bad"))) == real


def test_a_library_of_the_other_class_is_skipped(tmp_path: Path) -> None:
    build_32(tmp_path / "lib32" / "libp.so.1", F_AND_G, soname="libp.so.1")
    good = build(tmp_path / "lib" / "libp.so.1", F_AND_G, soname="libp.so.1")
    consumer = build(
        tmp_path / "libconsumer.so", USES_G, link=(good,), runpath="$ORIGIN/lib32:$ORIGIN/lib"
    )
    assert real_load(consumer) is None
    assert message(static_load(consumer)) is None
    good.unlink()  # only the 32-bit one is left
    real = real_load(consumer)
    assert real == "libp.so.1: wrong ELF class: ELFCLASS32"
    assert message(static_load(consumer)) == real


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            "/* GNU ld script */\nINPUT(/opt/lib/libp.so.1.real AS_NEEDED(/opt/lib/libq.so))\n",
            "invalid ELF header",
        ),
        ("INPUT(x)\n", "file too short"),
    ],
    ids=["linker-script", "short"],
)
def test_a_file_that_is_no_elf_stops_the_search(tmp_path: Path, text: str, why: str) -> None:
    good = build(tmp_path / "lib2" / "libp.so.1", F_AND_G, soname="libp.so.1")
    (tmp_path / "lib1").mkdir()
    (tmp_path / "lib1" / "libp.so.1").write_text(text)
    consumer = build(
        tmp_path / "libconsumer.so", USES_G, link=(good,), runpath="$ORIGIN/lib1:$ORIGIN/lib2"
    )
    real = real_load(consumer)
    assert real == f"{tmp_path}/lib1/libp.so.1: {why}"
    assert message(static_load(consumer)) == real


def test_glibc_hwcaps_subfolders_come_first(tmp_path: Path) -> None:
    if "x86-64-v2" not in facts().hwcaps:
        pytest.skip("this CPU's loader does not search glibc-hwcaps/x86-64-v2")
    good = build(tmp_path / "lib" / "libp.so.1", F_AND_G, soname="libp.so.1")
    consumer = build(tmp_path / "libconsumer.so", USES_G, link=(good,), runpath="$ORIGIN/lib")
    build(tmp_path / "lib" / "glibc-hwcaps" / "x86-64-v2" / "libp.so.1", ONLY_F, soname="libp.so.1")
    real = real_load(consumer)
    assert real == f"{consumer}: undefined symbol: g"
    assert message(static_load(consumer)) == real


def test_legacy_hwcaps_subfolders(tmp_path: Path) -> None:
    """tls/ inside a search folder: searched by glibc up to 2.36, not from 2.37 on."""
    good = build(tmp_path / "lib" / "libp.so.1", F_AND_G, soname="libp.so.1")
    consumer = build(tmp_path / "libconsumer.so", USES_G, link=(good,), runpath="$ORIGIN/lib")
    build(tmp_path / "lib" / "tls" / "libp.so.1", ONLY_F, soname="libp.so.1")
    real = real_load(consumer)
    assert real in (None, f"{consumer}: undefined symbol: g")
    assert message(static_load(consumer)) == real


@pytest.mark.parametrize("token", ["$LIB", "${PLATFORM}", "$ORIGIN/../$LIB"])
def test_lib_and_platform_tokens(tmp_path: Path, token: str) -> None:
    expanded = token.replace("${PLATFORM}", facts().platform).replace("$LIB", facts().lib)
    folder = tmp_path / "a" / expanded.replace("$ORIGIN/../", "")
    good = build(folder / "libp.so.1", F_AND_G, soname="libp.so.1")
    runpath = f"$ORIGIN/{token}" if not token.startswith("$ORIGIN") else token
    consumer = build(tmp_path / "a" / "libconsumer.so", USES_G, link=(good,), runpath=runpath)
    if token.startswith("$ORIGIN/.."):
        consumer = build(
            tmp_path / "a" / "sub" / "libconsumer.so", USES_G, link=(good,), runpath=runpath
        )
    assert real_load(consumer) is None
    assert message(static_load(consumer)) is None


def test_nodefaultlib_skips_the_cache_and_the_system_folders(tmp_path: Path) -> None:
    source = "extern int zlibVersion(void);\nint use(void) { return zlibVersion() != 0; }\n"
    plain = build(tmp_path / "libplain.so", source, flags=("-lz",))
    marked = build(tmp_path / "libmarked.so", source, flags=("-lz", "-Wl,-z,nodefaultlib"))
    assert real_load(plain) is None
    assert message(static_load(plain)) is None
    real = real_load(marked)
    # nothing was opened: no search path, and the cache and system folders are out
    assert real == "libz.so.1: cannot open shared object file"
    assert message(static_load(marked)) == real


def test_weak_references_may_stay_unresolved(tmp_path: Path) -> None:
    consumer = build(
        tmp_path / "libweak.so",
        "extern int maybe(void) __attribute__((weak));\n"
        "int use(void) { return maybe ? maybe() : 0; }\n",
    )
    assert real_load(consumer) is None
    assert message(static_load(consumer)) is None


@pytest.mark.parametrize("kind", ["function", "data"])
def test_lazy_binding_defers_functions_not_data(tmp_path: Path, kind: str) -> None:
    body = (
        "extern int gone(void);\nstatic long module_value(void) { return gone(); }"
        if kind == "function"
        else "extern int gone_data;\nstatic long module_value(void) { return gone_data; }"
    )
    ext = extension(tmp_path / "site", "lazy_mod", body)
    real = real_import("lazy_mod", tmp_path / "site", lazy=True)
    expected = None if kind == "function" else f"{ext}: undefined symbol: gone_data"
    assert real == expected
    assert message(static_load(ext, now=False)) == real
    assert (
        real_import("lazy_mod", tmp_path / "site")
        == f"{ext}: undefined symbol: gone{'' if kind == 'function' else '_data'}"
    )


VERSIONED_ONLY = {
    # f defined only at a later, non-default-hidden version: one candidate, accepted
    "one-later-version": (
        "VERS_1 { global: g; local: *; };\nVERS_2 { global: f; } VERS_1;\n",
        "int f(void) { return 1; }\nint g(void) { return 2; }\n",
    ),
    # f@VERS_1 (hidden, an old one) and f@@VERS_2 (the default): the default one serves
    "hidden-and-default": (
        "VERS_1 { global: g; local: *; };\nVERS_2 { global: f; } VERS_1;\n",
        "int f_old(void) { return 1; }\nint f_new(void) { return 2; }\nint g(void) { return 3; }\n"
        '__asm__(".symver f_old,f@VERS_1");\n__asm__(".symver f_new,f@@VERS_2");\n',
    ),
}


@pytest.mark.parametrize("case", sorted(VERSIONED_ONLY))
def test_an_unversioned_reference_to_a_versioned_definition(tmp_path: Path, case: str) -> None:
    script, source = VERSIONED_ONLY[case]
    plain = build(tmp_path / "build" / "libp.so.1", ONLY_F, soname="libp.so.1")
    consumer = build(
        tmp_path / "libconsumer.so",
        "extern int f(void);\nint use(void) { return f(); }\n",
        link=(plain,),
        runpath="$ORIGIN/lib",
    )
    build(tmp_path / "lib" / "libp.so.1", source, soname="libp.so.1", version_script=script)
    real = real_load(consumer)
    assert message(static_load(consumer)) == real


def test_a_name_without_a_slash_is_searched_for_as_the_caller_would(tmp_path: Path) -> None:
    """ctypes.CDLL("libp.so.1"): dlopen searches as its caller (_ctypes) searches: not the
    interpreter's RUNPATH, but LD_LIBRARY_PATH, the cache, the system folders."""
    import _ctypes

    build(tmp_path / "lib" / "libp.so.1", F_AND_G, soname="libp.so.1")
    script = (
        "import ctypes\ntry:\n    ctypes.CDLL('libp.so.1')\nexcept OSError as e:\n    print(e)\n"
    )

    def real(env: dict[str, str]) -> str | None:
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            check=True,
        )
        return out.stdout.strip() or None

    def static(library_path: str | None) -> str | None:
        linker = Linker(Environment(facts=facts(), cache=system_cache(), library_path=library_path))
        process, _ = linker.start(sys.executable)
        assert process is not None
        process, _ = linker.dlopen(process, _ctypes.__file__)
        load = linker.dlopen(process, "libp.so.1", caller=_ctypes.__file__)[1]
        return message(load)

    assert real({"LD_LIBRARY_PATH": str(tmp_path / "lib")}) is None
    assert static(str(tmp_path / "lib")) is None
    expected = real({})
    assert expected == "libp.so.1: cannot open shared object file: No such file or directory"
    assert static(None) == expected
