"""The checked-in generated Protobuf code matches what the pinned compiler makes of proto/."""

from __future__ import annotations

from pathlib import Path

from tidegate.runtime.wire import generate


def test_generated_code_is_not_stale(tmp_path: Path) -> None:
    fresh = generate.generate(tmp_path)
    assert fresh, "protoc produced nothing"
    for path in fresh:
        checked_in = generate.OUT_DIR / path.name
        assert checked_in.exists(), f"{path.name} is missing: run `make proto`"
        assert checked_in.read_bytes() == path.read_bytes(), (
            f"{path.name} is stale: run `make proto`"
        )
