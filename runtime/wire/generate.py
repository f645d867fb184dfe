"""Generate the Python Protobuf code (and its type stubs) from ``proto/``.

Run ``python -m tidegate.runtime.wire.generate`` (``make proto`` does) after
editing a ``.proto`` file. The output is checked in, so installing tidegate
needs no protoc; ``tests/runtime/test_wire_generated.py`` fails if it is stale.
Generation is reproducible because ``grpcio-tools`` is pinned in the ``dev`` extra.

protoc writes an import of another ``.proto`` file's module as a top-level
``import tidegate_compute_pb2``; the generated modules live in a package, so
:func:`generate` rewrites such imports to relative ones.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["PROTO_DIR", "PROTO_FILES", "generate"]

REPO = Path(__file__).resolve().parents[2]
PROTO_DIR = REPO / "proto"
PROTO_FILES = ("tidegate_compute.proto", "tidegate_storage.proto")
OUT_DIR = Path(__file__).resolve().parent / "gen"


def generate(out_dir: Path = OUT_DIR) -> list[Path]:
    """Compile every file of :data:`PROTO_FILES` into ``out_dir``; return the written files."""
    from grpc_tools import protoc  # a dev-only dependency

    out_dir.mkdir(parents=True, exist_ok=True)
    for name in PROTO_FILES:
        code = protoc.main(
            ["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}", f"--pyi_out={out_dir}", name]
        )
        if code != 0:
            raise RuntimeError(f"protoc failed on {name} with exit code {code}")
    written = sorted(
        p for p in out_dir.iterdir() if p.suffix in (".py", ".pyi") and p.name != "__init__.py"
    )
    for path in written:
        text = path.read_text()
        fixed = _SIBLING_IMPORT.sub(r"from . import \1", text)
        if fixed != text:
            path.write_text(fixed)
    return written


_SIBLING_IMPORT = re.compile(r"^import (tidegate_\w+_pb2 as \w+)$", re.MULTILINE)
"""A generated module's import of another generated module (made relative by :func:`generate`)."""


if __name__ == "__main__":
    for path in generate():
        print(f"generated {path.relative_to(REPO)}")
    sys.exit(0)
