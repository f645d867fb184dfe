"""A griffe extension that shows tidegate's reST-flavoured docstrings as Markdown.

mkdocstrings renders docstrings as Markdown; tidegate's are written the way
Sphinx reads them. The differences that matter, and what this does about them
(the sources are not touched, only what the API pages show):

* cross-reference roles -- ``:class:`~.x.Name```, ``:meth:`Name.m```,
  ``:mod:`.effects``` -- become code spans of the name as Sphinx would print
  it (``~`` keeps the last component; leading dots go);
* doctest blocks (``>>>`` paragraphs) become fenced ``pycon`` code, where
  Markdown would have made block quotes of them;
* literal blocks (a paragraph ending in ``::`` and the indented lines after
  it) become fenced code (``python`` if it parses, else ``text``), and the
  ``::`` a single colon (none if it stood alone).

Double-backtick literals need nothing: they are code spans in Markdown too.
Used by mkdocstrings through ``extensions:`` in ``mkdocs.yml``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|mod|func|data|attr|exc|obj|const|ref):`([^`]+)`")


def _role_text(match: re.Match[str]) -> str:
    target = match.group(1).strip()
    titled = re.fullmatch(r"(.*?)\s*<([^>]+)>", target)
    if titled:
        return f"`{titled.group(1)}`"
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target.lstrip('.')}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _fence(lines: list[str], indent: int, language: str) -> list[str]:
    """``lines`` (blank ones at either end dropped) as a fenced block at ``indent``.

    The lines lose their common indentation and take ``indent`` instead.
    """
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    body = lines[start:end]
    common = min((_indent(line) for line in body if line.strip()), default=0)
    pad = " " * indent
    return [
        f"{pad}```{language}",
        *(pad + line[common:] if line.strip() else "" for line in body),
        f"{pad}```",
    ]


def _language(block: list[str]) -> str:
    """``python`` for a literal block that parses as Python (``await`` allowed), else ``text``."""
    common = min(_indent(line) for line in block if line.strip())
    source = "\n".join(line[common:] for line in block)
    try:
        compile(source, "<docstring>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return "text"
    return "python"


def to_markdown(text: str) -> str:
    """``text`` (a docstring) with roles, doctests and literal blocks in Markdown."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = _indent(line)
        if stripped.startswith(">>>"):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out.extend(_fence(block, indent, "pycon"))
            continue
        if stripped.endswith("::") and not stripped.startswith(".."):
            lead = stripped[:-2].rstrip()
            if lead:
                out.append(" " * indent + ROLE.sub(_role_text, lead) + ":")
            i += 1
            block = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
                block.append(lines[i])
                i += 1
            if any(b.strip() for b in block):
                out.extend(["", *_fence(block, indent, _language(block)), ""])
            continue
        out.append(ROLE.sub(_role_text, line))
        i += 1
    return "\n".join(out)


class RstToMarkdown(griffe.Extension):
    """Rewrite every docstring with :func:`to_markdown` as griffe loads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
