"""The native layer on real published wheels: PyPI's torchvision 0.28.0 (built against the CUDA
torch 2.13.0) beside the runtime's torch 2.13.0+cpu.

pip is satisfied (`torch==2.13.0` holds for `2.13.0+cpu`), and the import fails for real
with `operator torchvision::nms does not exist`: torchvision opens its `_C.so` itself
(torch.ops.load_library, a computed path), swallows the loader's OSError, and fails later.
The loader's reason, asserted first with a real dlopen after `import torch`: `_C.so` needs
libc10_cuda.so, which a CPU torch does not have. The reference has no torchvision.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.classify.nativebed import SITE, make_bed, native, real_import
from tests.corpus import table
from tests.helpers import REPO

pytestmark = pytest.mark.slow

RUNTIME = REPO / "examples" / ".hosts" / "runtime"
TORCHVISION = "torchvision==0.28.0"
APP = "import importlib.util\nimport torch\n\nif importlib.util.find_spec('torchvision'):\n    import torchvision\n"


def test_a_torchvision_built_for_cuda_torch_beside_a_cpu_torch(tmp_path: Path) -> None:
    from examples.build_hosts import build_runtime

    runtime_site = build_runtime(RUNTIME)
    bed = make_bed(tmp_path)
    for root in (bed.ref, bed.tgt):
        subprocess.run(["python3", "-m", "venv", str(root)], check=True)
        (root / SITE / "_runtime.pth").write_text(f"{runtime_site}\n")
        # as transformers does: `if is_torchvision_available(): from torchvision import ...`
        (root / SITE / "app.py").write_text(APP)
    subprocess.run(
        [str(bed.tgt / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", TORCHVISION],
        check=True,
    )
    c_so = bed.tgt_site / "torchvision" / "_C.so"
    # the ground truth: the reference starts, the target does not, and why
    ref, tgt = real_import(bed.ref), real_import(bed.tgt)
    assert ref is None
    assert tgt == "operator torchvision::nms does not exist"
    loader = subprocess.run(
        [
            str(bed.tgt / "bin" / "python"),
            "-c",
            f"import torch, ctypes\ntry:\n    ctypes.CDLL({str(c_so)!r})\n"
            "except OSError as e:\n    print(e)\n",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loader == "libc10_cuda.so: cannot open shared object file: No such file or directory"

    (finding,) = [f for f in native(bed.diff()) if f.subject == "torchvision/_C.so"]
    assert finding.severity == "risky"  # shipped, opened by its own code: not shown to load
    assert finding.evidence[0].detail == loader
    assert "it needs libc10_cuda.so, which no search path provides" in finding.reason
    assert "startup imports torchvision (app → torchvision, at module level under" in finding.reason

    # the real import's error names torchvision's operators: the load is why, now fatal
    checked = [f for f in native(bed.diff(import_check=True)) if f.subject == "torchvision/_C.so"]
    assert checked[0].severity == "fatal" and checked[0].decided_by == "import-check"
    assert "operator torchvision::nms does not exist" in checked[0].evidence[0].detail
    table.record(
        "torchvision-0.28-cuda-beside-cpu-torch",
        report="the cause in vllm-project/vllm#18776: torchvision 0.28.0 beside a CPU torch",
        culprit="torchvision/_C.so",
        reference=table.outcome(ref),
        target=table.outcome(tgt),
        static=finding.severity,
        import_check=checked[0].severity,
        expected="fatal",
        test=table.current_test(),
    )
