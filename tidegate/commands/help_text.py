"""Docstrings as command-line help: reStructuredText's inline markup turned into plain text.

A command's ``--help`` reuses its module docstring, which is written for the API
reference (``:mod:`.control```, ````tidegate up````). A terminal shows markup raw,
so :func:`plain` keeps what a reader needs: a role's text (its last dotted part
for a bare target, the title of a ``title <target>`` one) and a literal's content;
a module named in parentheses, a pointer for readers of the code, goes.

>>> plain("``tidegate up`` serves :class:`~tidegate.runtime.Environment` (:mod:`.control`).")
'tidegate up serves Environment.'
>>> plain(":data:`the definitions <DEFINITIONS>`, :func:`f`, ``x``")
'the definitions, f, x'
"""

from __future__ import annotations

import re

__all__ = ["plain"]

_MODULE_ASIDE = re.compile(r"\s*\(:mod:`[^`]*`\)")
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`([^`<]*?)\s*(?:<[^`>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)


def _role_text(match: re.Match[str]) -> str:
    text = match.group(1)
    if match.group(0).rstrip("`").endswith(">"):  # `title <target>`: the title
        return text
    return text.lstrip("~.!").rsplit(".", 1)[-1]


def plain(doc: str | None) -> str:
    """``doc`` with reST roles and literals replaced by their plain text."""
    text = _MODULE_ASIDE.sub("", doc or "")
    return _LITERAL.sub(r"\1", _ROLE.sub(_role_text, text))
