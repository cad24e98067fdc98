"""Build constraints the target must meet: torch against its GPUs and driver (pure)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envsync.classify import Startup, classify
from envsync.model.changes import differences
from envsync.model.codec import from_data
from envsync.model.environment import Distribution, Gpu, GpuInfo, Snapshot, Torch, Unavailable

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "ct129.json"
NO_STARTUP = Startup(entrypoint=None, command=(), packs=())


def base() -> Snapshot:
    return from_data(Snapshot, json.loads(SNAPSHOT.read_text()))


def with_gpu(snap: Snapshot, cc: str, cuda_driver: str = "13.0") -> Snapshot:
    gpu = GpuInfo(
        gpus=(
            Gpu(
                index=0,
                name="NVIDIA RTX PRO 6000 Blackwell",
                compute_capability=cc,
                driver_version="580.95.05",
            ),
        ),
        driver_version="580.95.05",
        cuda_driver_version=cuda_driver,
    )
    return replace(snap, gpu=gpu)


def with_torch(snap: Snapshot, **changes: Any) -> Snapshot:
    assert isinstance(snap.torch, Torch)
    return replace(snap, torch=replace(snap.torch, **changes))


def check(reference: Snapshot, target: Snapshot) -> dict[str, tuple[str, str, str]]:
    report = classify(reference, target, differences(reference, target), NO_STARTUP)
    return {f.subject: (f.kind, f.severity, f.reason) for f in report.findings}


def test_gpu_compute_capability_missing_from_torch_arch_list_is_fatal() -> None:
    reference = with_gpu(base(), "9.0")
    target = with_torch(with_gpu(base(), "12.0"), arch_list=("sm_80", "sm_90"))
    kind, severity, reason = check(reference, target)["torch arch list"]
    assert (kind, severity) == ("gpu", "fatal")
    assert "compute capability 12.0" in reason and "no kernel image is available" in reason


@pytest.mark.parametrize(
    ("arch", "fatal"),
    [
        (("sm_90", "sm_120"), False),
        (("sm_90", "compute_90"), False),
        (("sm_90", "compute_121"), True),
    ],
)
def test_ptx_of_a_lower_arch_runs_on_newer_gpus(arch: tuple[str, ...], fatal: bool) -> None:
    target = with_torch(with_gpu(base(), "12.0"), arch_list=arch)
    assert ("torch arch list" in check(with_gpu(base(), "9.0"), target)) is fatal


def test_unknown_arch_list_is_no_verdict() -> None:
    target = with_torch(with_gpu(base(), "12.0"), arch_list=Unavailable(reason="no --deep"))
    assert "torch arch list" not in check(with_gpu(base(), "9.0"), target)


def test_cuda_build_newer_than_the_driver_is_fatal() -> None:
    target = with_torch(with_gpu(base(), "9.0", cuda_driver="12.8"), cuda="13.0")
    kind, severity, reason = check(with_gpu(base(), "9.0"), target)["torch CUDA build"]
    assert (kind, severity) == ("torch", "fatal")
    assert "built for CUDA 13.0" in reason and "supports CUDA 12.8 at most" in reason
    fine = with_torch(with_gpu(base(), "9.0", cuda_driver="13.1"), cuda="13.0")
    assert "torch CUDA build" not in check(with_gpu(base(), "9.0"), fine)


def test_the_same_problem_on_the_reference_is_not_drift() -> None:
    both = with_torch(with_gpu(base(), "9.0", cuda_driver="12.8"), cuda="13.0")
    assert "torch CUDA build" not in check(both, both)


def test_mismatched_cuda_labels_across_torch_packages_are_fatal() -> None:
    target = base()
    vision = Distribution(name="torchvision", display_name="torchvision", version="0.26.0+cu128")
    target = replace(target, distributions=(*target.distributions, vision))
    reference = replace(
        base(),
        distributions=(*base().distributions, replace(vision, version="0.26.0+cu130")),
    )
    kind, severity, reason = check(reference, target)["torch build labels"]
    assert (kind, severity) == ("torch", "fatal")
    assert "torch +cu130, torchvision +cu128" in reason
