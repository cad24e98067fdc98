"""The model actually served decides whether a failing model module is fatal.

A small engine written for the purpose, `eng`, keeps its model modules as SGLang does
(eng/models/*.py, each naming what it serves in `EntryClass`; the registry imports every
one inside try/except) and as vLLM does (a literal table of architecture -> (module,
class); only the served one is imported). One model module imports a package the target
lacks. The model's config.json is in a local folder or in a Hugging Face cache (HF_HOME
from the service's environment); nothing is downloaded. A rule pack of the test's own
says which registry is which.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsync.cli import main
from tests.helpers import make_venv, make_wheel, pip_install

pytestmark = pytest.mark.slow

PACK = """\
[pack]
name = "{name}"
entrypoints = ["{entry}"]
model_flags = ["--model-path"]

[[startup]]
module = "{models}.*"
guarded = true
selected_by = "architectures"
registry = "{registry}"
only_selected = {only}
reason = "the model registry imports model modules by name (registry.py)"
"""

ENGINE = {
    "eng/__init__.py": "",
    "eng/serve.py": "import sys\n",
    "eng/models/__init__.py": "",
    "eng/models/llama.py": "import llamakit\n\n\nclass LlamaForCausalLM:\n    pass\n\n\n"
    "EntryClass = LlamaForCausalLM\n",
    "eng/models/qwen.py": "class QwenForCausalLM:\n    pass\n\n\nEntryClass = [QwenForCausalLM]\n",
    "eng/vmodels/__init__.py": "",
    "eng/vmodels/registry.py": '_TEXT = {\n    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),\n'
    '    "QwenForCausalLM": ("qwen", "QwenForCausalLM"),\n}\n_MODELS = {**_TEXT}\n',
    "eng/vmodels/llama.py": "import llamakit\n",
    "eng/vmodels/qwen.py": "import sys\n",
}


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("served")
    w = root / "wheels"
    eng = make_wheel(w, "eng", "1.0", ENGINE)
    kit = make_wheel(w, "llamakit", "1.0", {"llamakit/__init__.py": ""})
    pip_install(make_venv(root / "ref"), eng, kit)
    pip_install(make_venv(root / "tgt"), eng)
    for name, arch in (("llama", "LlamaForCausalLM"), ("qwen", "QwenForCausalLM")):
        folder = root / "models" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"architectures": [arch]}))
    # a Hugging Face cache: refs/main names the snapshot
    repo = root / "hf" / "hub" / "models--org--llama-1b"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"]})
    )
    return root


def _diff(
    bed: Path, capsys: pytest.CaptureFixture[str], model: str, registry: str, env: str = ""
) -> tuple[dict, list[str]]:
    vllm_like = registry.startswith("table:")
    pack = bed / f"pack-{vllm_like}.toml"
    pack.write_text(
        PACK.format(
            name="eng",
            entry="eng.serve",
            models="eng.vmodels" if vllm_like else "eng.models",
            registry=registry,
            only="true" if vllm_like else "false",
        )
    )
    inv = bed / "envsync.toml"
    service_env = f"\nenv = {{ {env} }}" if env else ""
    inv.write_text(
        f'[defaults]\nreference = "ref"\ntarget = "tgt"\nrules = ["{pack}"]\n'
        f'[service]\ncommand = ["{{python}}", "-m", "eng.serve", "--model-path", "{model}"]'
        f"{service_env}\n"
        f'[hosts.ref]\npython = "{bed / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{bed / "tgt" / "bin" / "python"}"\n'
    )
    capsys.readouterr()
    main(["--inventory", str(inv), "-q", "diff", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    return {f["subject"]: f for f in data["findings"]}["llamakit"], data["notes"]


@pytest.mark.parametrize(
    ("registry", "other"),
    [("entry-class", "degraded"), ("table:eng.vmodels.registry:_MODELS", "benign")],
    ids=["imports-every-model", "imports-the-served-one"],
)
def test_the_served_architectures_module_is_fatal(
    bed: Path, capsys: pytest.CaptureFixture[str], registry: str, other: str
) -> None:
    llama, notes = _diff(bed, capsys, str(bed / "models" / "llama"), registry)
    assert llama["severity"] == "fatal", llama["reason"]
    assert "the served model's architecture, LlamaForCausalLM" in llama["reason"]
    assert not notes
    # another model is served: the failing module is only one the registry may import
    qwen, notes = _diff(bed, capsys, str(bed / "models" / "qwen"), registry)
    assert qwen["severity"] == other, qwen["reason"]
    assert not notes


def test_a_repository_id_is_read_from_the_services_hugging_face_cache(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_home = f'HF_HOME = "{bed / "hf"}"'
    llama, notes = _diff(bed, capsys, "org/llama-1b", "entry-class", env=hf_home)
    assert llama["severity"] == "fatal", (llama["reason"], notes)
    # not in the cache the service uses: said, and nothing is downloaded
    llama, notes = _diff(bed, capsys, "org/llama-1b", "entry-class")
    assert llama["severity"] == "degraded"
    (note,) = notes
    assert note.startswith("tgt: org/llama-1b is not in the Hugging Face cache at ")
    assert "(envsync downloads nothing)" in note


def test_no_model_is_said_and_every_module_stays_guarded(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llama, notes = _diff(bed, capsys, "/models/absent", "entry-class")
    assert llama["severity"] == "degraded"
    assert notes == [
        "tgt: the model path /models/absent does not exist on this host: envsync cannot tell "
        "which model module serves the model, so a failing model module is judged as the "
        "model registry imports every one of them"
    ]
    assert "which of them serves the model envsync cannot tell" in llama["reason"]
