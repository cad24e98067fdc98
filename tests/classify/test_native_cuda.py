"""CUDA coherence: the CUDA majors the startup's loads need against the driver (recorded
nvidia-smi output), nvidia-* distributions of two CUDA majors, torch's CUDA build against
the CUDA libraries startup loads. The loads are real: stub CUDA libraries with the real
sonames, built here, needed by a real extension module, judged by a real probe."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from envsync.classify.native import cuda_findings
from envsync.hostside.facts import machine
from envsync.model.environment import Gpu, GpuInfo, Snapshot
from tests.classify.nativebed import Bed, install, make_bed, real_import, venv
from tests.classify.test_native_diff import APP, KERNEL_INIT, OPS
from tests.hostside.native.toolchain import build, extension

DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi"
USES = "extern int cudaRuntimeGetVersion(void);\nstatic long module_value(void) { return cudaRuntimeGetVersion(); }"


def recorded_gpu(name: str) -> GpuInfo:
    """GPU facts from recorded nvidia-smi output, parsed as the probe parses it."""
    gpus = machine.parse_gpu_csv((DATA / f"{name}-query.csv").read_text())
    cuda = machine.parse_cuda_version((DATA / f"{name}-nvidia-smi.txt").read_text())
    return GpuInfo(
        gpus=tuple(Gpu(**g) for g in gpus),
        driver_version=gpus[0]["driver_version"],
        cuda_driver_version=cuda,
    )


def cuda_bed(
    tmp_path: Path, major: int, extra: dict[str, tuple[str, dict[str, Path | str]]]
) -> Bed:
    """Both hosts: a kernel needing libcudart.so.MAJOR from nvidia-cuda-runtime; the target
    also gets `extra` ({dist: (version, files)})."""
    bed = make_bed(tmp_path)
    venv(bed.ref), venv(bed.tgt)
    soname = f"libcudart.so.{major}"
    cudart = build(
        tmp_path / "cuda" / soname, "int cudaRuntimeGetVersion(void) { return 1; }\n", soname=soname
    )
    ops = extension(
        tmp_path / "build" / "kernel",
        "ops",
        USES,
        link=(cudart,),
        runpath="$ORIGIN/../nvidia/cuda_runtime/lib",
    )
    for site in (bed.ref_site, bed.tgt_site):
        install(
            site,
            f"nvidia-cuda-runtime-cu{major}",
            f"{major}.0.88",
            {f"nvidia/cuda_runtime/lib/{soname}": cudart},
        )
        install(site, "kernel", "1.0", {**KERNEL_INIT, OPS: ops})
        (site / "app.py").write_text(APP)
    for name, (version, files) in extra.items():
        install(bed.tgt_site, name, version, files)
    assert real_import(bed.ref) is None and real_import(bed.tgt) is None  # both load
    return bed


def snapshots(bed: Bed, gpu: GpuInfo) -> tuple[Snapshot, Snapshot]:
    comparison = bed.compare()
    return replace(comparison.reference, gpu=gpu), replace(comparison.snapshot, gpu=gpu)


@pytest.mark.parametrize(("recorded", "fatal"), [("ct200", False), ("cuda12-driver", True)])
def test_a_cuda_runtime_newer_than_the_driver(tmp_path: Path, recorded: str, fatal: bool) -> None:
    bed = cuda_bed(tmp_path, 13, {})
    reference, target = snapshots(bed, recorded_gpu(recorded))
    # the reference's driver is the ct200 one: CUDA 13.0
    reference = replace(reference, gpu=recorded_gpu("ct200"))
    found = cuda_findings(reference, target)
    if not fatal:
        assert found == []
        return
    (finding,) = found
    assert finding.subject == "CUDA runtime" and finding.severity == "fatal"
    assert "startup loads libcudart.so.13 (CUDA 13)" in finding.reason
    assert "550.54.15 supports CUDA 12.4 at most" in finding.reason


def test_cuda_12_and_13_distributions_in_one_environment(tmp_path: Path) -> None:
    stub = build(
        tmp_path / "c12" / "libcublas.so.12",
        "int x(void) { return 0; }\n",
        soname="libcublas.so.12",
    )
    bed = cuda_bed(
        tmp_path,
        13,
        {"nvidia-cublas-cu12": ("12.8.4.1", {"nvidia/cublas/lib/libcublas.so.12": stub})},
    )
    reference, target = snapshots(bed, recorded_gpu("ct200"))
    (finding,) = cuda_findings(reference, target)
    assert finding.subject == "CUDA libraries" and finding.severity == "risky"
    assert (
        "CUDA 12: nvidia-cublas-cu12 12.8.4.1; CUDA 13: nvidia-cuda-runtime-cu13 13.0.88"
        in finding.reason
    )


def test_torchs_cuda_build_against_the_cuda_libraries_startup_loads(tmp_path: Path) -> None:
    torch: dict[str, Path | str] = {
        "torch/__init__.py": "",
        "torch/version.py": "__version__ = '2.11.0+cu128'\ncuda = '12.8'\n",
    }
    bed = cuda_bed(tmp_path, 13, {"torch": ("2.11.0+cu128", torch)})
    reference, target = snapshots(bed, recorded_gpu("ct200"))
    assert target.torch is not None and reference.torch is None
    (finding,) = cuda_findings(reference, target)
    assert finding.subject == "torch CUDA libraries" and finding.severity == "risky"
    assert (
        "torch 2.11.0+cu128 is built for CUDA 12.8, and startup also loads libcudart.so.13"
        in finding.reason
    )
