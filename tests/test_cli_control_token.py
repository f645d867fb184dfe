"""The control endpoint's token is kept across restarts of ``tidegate up`` unless rotated."""

from __future__ import annotations

import stat
from pathlib import Path

from tidegate.commands.control import TOKEN_FILE, stored_token


def test_the_token_is_kept_until_rotated_and_readable_by_its_owner_only(tmp_path: Path) -> None:
    first = stored_token(tmp_path)
    assert stored_token(tmp_path) == first
    assert stat.S_IMODE((tmp_path / TOKEN_FILE).stat().st_mode) == 0o600
    rotated = stored_token(tmp_path, rotate=True)
    assert rotated != first and stored_token(tmp_path) == rotated


def test_a_damaged_token_file_is_replaced_not_trusted(tmp_path: Path) -> None:
    for damaged in (b"", b"short", b"not a token at all, with spaces" * 2, b"\xff\xfe" * 20):
        (tmp_path / TOKEN_FILE).write_bytes(damaged)
        token = stored_token(tmp_path)
        assert token.encode() != damaged.strip() and len(token) >= 32
        assert stored_token(tmp_path) == token
