"""The small tokenizer of the statements sqlglot does not parse (sources, sinks, clusters).

Words, quoted identifiers, string literals, integers and punctuation, each with its 1-based
position so errors point where PostgreSQL's would. A statement's trailing ``;`` is dropped;
one inside it is punctuation the grammar refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import SqlSyntaxError

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*)
    |(?P<string>'(?:[^']|'')*')
    |(?P<quoted>"(?:[^"]|"")+")
    |(?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    |(?P<number>-?\d+)
    |(?P<punct>[(),=.;])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    """``string``, ``quoted``, ``word``, ``number`` or ``punct``."""
    text: str
    position: int
    """1-based offset of its first character."""

    @property
    def upper(self) -> str:
        """A word in upper case (keywords compare this way); empty for every other kind."""
        return self.text.upper() if self.kind == "word" else ""


def tokens(text: str) -> list[Token]:
    """The tokens of ``text`` without whitespace, comments and trailing ``;`` [SqlSyntaxError]."""
    out: list[Token] = []
    i = 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            if text[i] in "'\"":
                raise SqlSyntaxError("unterminated quoted string", position=i + 1, sql=text)
            raise SqlSyntaxError(f'syntax error at or near "{text[i]}"', position=i + 1, sql=text)
        kind = m.lastgroup or ""
        if kind != "ws":
            out.append(Token(kind, m.group(), i + 1))
        i = m.end()
    while out and out[-1].kind == "punct" and out[-1].text == ";":
        out.pop()
    return out
