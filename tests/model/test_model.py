"""The dataclass <-> JSON codec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsync.errors import DecodeError
from envsync.model.codec import from_data, to_data
from envsync.model.environment import Snapshot, Torch, Unavailable

DATA = Path(__file__).resolve().parent.parent / "data"


def test_snapshot_round_trips_through_plain_data() -> None:
    data = json.loads((DATA / "snapshots" / "ct129.json").read_text())
    snap = from_data(Snapshot, data)
    assert to_data(snap) == data
    assert isinstance(snap.torch, Torch)
    assert snap.torch.nccl == Unavailable(reason="NCCL not built")
    assert snap.distribution("torch").version == "2.11.0+cu130"  # type: ignore[union-attr]  # distribution() is None for a name not installed; torch is (else the test fails here)
    assert snap.distribution("nope") is None


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"host": 5}, r"Snapshot.host: expected a string, got 5"),
        ({"distributions": {}}, r"Snapshot.distributions: expected a list"),
        ({"bogus": 1}, r"Snapshot: unknown key 'bogus'"),
        ({"gpu": {"unavailable": 3}}, r"Snapshot.gpu.unavailable: expected a string"),
        ({"interpreter": None}, r"Snapshot.interpreter: a value is required"),
        ({"duration_s": "fast"}, r"expected a number"),
        ({"partial": 1}, r"Snapshot.partial: expected true or false"),
    ],
)
def test_decode_errors_name_the_offending_key(patch: dict[str, object], message: str) -> None:
    data = json.loads((DATA / "snapshots" / "ct129.json").read_text())
    data.update(patch)
    with pytest.raises(DecodeError, match=message):
        from_data(Snapshot, data)


def test_missing_required_key() -> None:
    data = json.loads((DATA / "snapshots" / "ct129.json").read_text())
    del data["system"]
    with pytest.raises(DecodeError, match="missing key 'system'"):
        from_data(Snapshot, data)
