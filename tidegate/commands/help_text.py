"""Help text for every command: reStructuredText's inline markup turned into plain text.

A command's ``--help`` reuses its module docstring, which is written for the API
reference (``:mod:`.control```, ````tidegate up````), and help strings name
commands as code (```tidegate up```). A terminal shows markup raw, so
:func:`plain` keeps what a reader needs: a role's text (its last dotted part
for a bare target, the title of a ``title <target>`` one), a literal's content
and interpreted text's; a module named in parentheses, a pointer for readers of
the code, goes.

:class:`Parser` is the one place that applies it: the ``tidegate`` parser and
every subcommand's parser (argparse makes a subparser of its parent's class)
format their descriptions, epilogs and argument help with
:class:`PlainHelpFormatter`, which also fills each paragraph anew to the
terminal's width (markup removed, lines would be ragged) and keeps indented
blocks (examples) as written.

>>> plain("``tidegate up`` serves :class:`~tidegate.runtime.Environment` (:mod:`.control`).")
'tidegate up serves Environment.'
>>> plain(":data:`the definitions <DEFINITIONS>`, :func:`f`, ``x``, `tidegate sql`")
'the definitions, f, x, tidegate sql'
>>> plain("Examples::")
'Examples:'
"""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Any

__all__ = ["Parser", "PlainHelpFormatter", "plain"]

_MODULE_ASIDE = re.compile(r"\s*\(:mod:`[^`]*`\)")
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`([^`<]*?)\s*(?:<[^`>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)
_INTERPRETED = re.compile(r"(?<![`\w])`([^`\n]+)`(?![`\w])")
_LITERAL_BLOCK = re.compile(r"(\S)::$|\s+::$", re.MULTILINE)
_ITEM = re.compile(r"^(?:[*-]|\d+\.)\s")


def _role_text(match: re.Match[str]) -> str:
    text = match.group(1)
    if match.group(0).rstrip("`").endswith(">"):  # `title <target>`: the title
        return text
    return text.lstrip("~.!").rsplit(".", 1)[-1]


def plain(doc: str | None) -> str:
    """``doc`` with reST roles, literals and interpreted text replaced by their plain text
    (and a paragraph's closing ``::`` by a colon)."""
    text = _MODULE_ASIDE.sub("", doc or "")
    text = _ROLE.sub(_role_text, text)
    text = _INTERPRETED.sub(r"\1", _LITERAL.sub(lambda m: m.group(1).replace("`", "\0"), text))
    text = _LITERAL_BLOCK.sub(lambda m: f"{m.group(1)}:" if m.group(1) else "", text)
    return text.replace("\0", "`")


class PlainHelpFormatter(argparse.HelpFormatter):
    """argparse's formatter over :func:`plain` text: each paragraph (and each list item)
    filled to the width, indented blocks kept as written."""

    def _format_text(self, text: str) -> str:
        if "%(prog)" in text:
            text = text % {"prog": self._prog}
        width = max(self._width - self._current_indent, 11)
        indent = " " * self._current_indent
        blocks = [_fill(p, width, indent) for p in re.split(r"\n\s*\n", plain(text).strip("\n"))]
        return "\n\n".join(b for b in blocks if b) + "\n\n"

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action))


def _fill(paragraph: str, width: int, indent: str) -> str:
    lines = paragraph.splitlines()
    if all(line[:1].isspace() for line in lines if line.strip()):  # an indented block
        return "\n".join(indent + line.rstrip() for line in lines)
    items: list[list[str]] = []
    for line in lines:
        if not items or _ITEM.match(line.strip()):
            items.append([])
        items[-1].append(line.strip())
    return "\n".join(
        textwrap.fill(
            " ".join(item),
            width,
            initial_indent=indent,
            subsequent_indent=indent + ("  " if _ITEM.match(item[0]) else ""),
            break_on_hyphens=False,
        )
        for item in items
    )


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose help is plain text (:class:`PlainHelpFormatter`),
    and so are its subcommands' (their parsers are of their parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", PlainHelpFormatter)
        super().__init__(*args, **kwargs)
