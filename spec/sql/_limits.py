"""How deep a statement may nest, and the Python frames for parsing and binding one that deep.

sqlglot's recursive descent spends about twenty frames per level of nesting, and the binder a
few more, so the statements the parser admits need more than Python's default limit of 1,000.
The limit is raised only while a statement is parsed or bound (synchronous work, never across
an ``await``) and put back after, so code elsewhere that relies on the default to refuse deep
input (the wire codec's plan encoder, ``json``) still meets it. Python 3.11 calls Python
functions without growing the C stack, so the higher limit is safe for the parser.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import sqlglot

from ..errors import ProgramLimitExceeded, StatementTooComplex

__all__ = [
    "MAX_ARRAY_DIMENSIONS",
    "MAX_SQL_BYTES",
    "MAX_SQL_NESTING",
    "MAX_STATEMENT_TOKENS",
    "MAX_TARGET_LIST",
    "check_nesting",
    "check_sql_size",
    "check_tokens",
    "enough_frames",
    "with_enough_frames",
]

MAX_SQL_NESTING = 128
"""The deepest a statement's parentheses, brackets and ``CASE`` expressions may nest
(Materialize's parser refuses past the same depth). Deeper statements are
:class:`~tidegate.spec.errors.StatementTooComplex`, found by counting tokens before the
recursive-descent parser and binder recurse into them."""

MAX_ARRAY_DIMENSIONS = 6
"""The most ``ARRAY[...]`` constructors that may nest (PostgreSQL's limit on an array's
dimensions)."""

MAX_SQL_BYTES = 1024 * 1024
"""The largest query string accepted (a script, or one statement of the extended protocol), in
bytes of UTF-8: refused as :class:`~tidegate.spec.errors.ProgramLimitExceeded` before it is
tokenized, so the tokenizer's cost (a few microseconds and a few hundred bytes per token) is
bounded. A 10 MB ``SELECT 1+1+...`` used to hold the controller for minutes and 3.7 GB."""

MAX_STATEMENT_TOKENS = 20_000
"""The most tokens one statement may have: past it,
:class:`~tidegate.spec.errors.StatementTooComplex`, counted from the tokenizer's output before the
parser runs. Parsing and planning cost 10 to 40 microseconds per token on a small machine (an
``IN`` list over a table is the dearest shape found: 0.7 s of CPU at this limit, 1.9 s at
50,000 tokens), so a statement at the limit is parsed and planned in under a second; an
``INSERT`` of 4,000 one-column rows fits."""

MAX_TARGET_LIST = 1664
"""The most columns a ``SELECT`` list may have, ``*`` expanded (PostgreSQL's limit, SQLSTATE
54011 ``too_many_columns``): binding a list takes time quadratic in its width, and 25,000 columns
within the token limit took three seconds."""

FRAMES = 10_000

_lock = threading.Lock()
_holders = 0
_saved = 0

P = ParamSpec("P")
R = TypeVar("R")


def check_sql_size(text: str) -> None:
    """[ProgramLimitExceeded] if ``text`` is over :data:`MAX_SQL_BYTES` bytes of UTF-8 (the text
    is not attached to the error: an error must not echo megabytes back)."""
    if len(text) * 4 <= MAX_SQL_BYTES:  # no character takes more than four bytes
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SQL_BYTES:
        raise ProgramLimitExceeded(
            f"statement of {size} bytes is over the limit of {MAX_SQL_BYTES} bytes",
            hint="Send large data as parameters, through COPY FROM STDIN or in several statements.",
        )


def check_tokens(count: int) -> None:
    """[StatementTooComplex] if a statement of ``count`` tokens is over
    :data:`MAX_STATEMENT_TOKENS`."""
    if count > MAX_STATEMENT_TOKENS:
        raise StatementTooComplex(
            f"statement of {count} tokens is over the limit of {MAX_STATEMENT_TOKENS} tokens"
        )


def check_nesting(tokens: list[Any], text: str) -> None:
    """[StatementTooComplex] past :data:`MAX_STATEMENT_TOKENS` tokens, or at the first opening
    token past :data:`MAX_SQL_NESTING` levels;
    [ProgramLimitExceeded] at an ``ARRAY[`` constructor nested past :data:`MAX_ARRAY_DIMENSIONS`
    (sqlglot's parse of nested constructors takes time exponential in their depth)."""
    check_tokens(len(tokens))
    token = sqlglot.TokenType
    opening = (token.L_PAREN, token.L_BRACKET, token.CASE)
    closing = (token.R_PAREN, token.R_BRACKET, token.END)
    open_arrays: list[bool] = []  # for each level open now: whether it is an ARRAY[ constructor
    arrays = 0
    previous: Any = None
    for t in tokens:
        if t.token_type in opening:
            constructor = t.token_type == token.L_BRACKET and (
                previous is not None and previous.token_type == token.ARRAY
            )
            open_arrays.append(constructor)
            arrays += constructor
            if len(open_arrays) > MAX_SQL_NESTING:
                raise StatementTooComplex(
                    f"statement nests deeper than {MAX_SQL_NESTING} levels",
                    position=t.start + 1,
                    sql=text,
                )
            if arrays > MAX_ARRAY_DIMENSIONS:
                raise ProgramLimitExceeded(
                    f"number of array dimensions ({arrays}) exceeds the maximum allowed "
                    f"({MAX_ARRAY_DIMENSIONS})",
                    position=previous.start + 1,
                    sql=text,
                )
        elif t.token_type in closing and open_arrays:
            arrays -= open_arrays.pop()
        previous = t


@contextmanager
def enough_frames() -> Iterator[None]:
    """At least :data:`FRAMES` frames inside; the limit as it was once the last holder leaves."""
    global _holders, _saved
    with _lock:
        if _holders == 0:
            _saved = sys.getrecursionlimit()
            if _saved < FRAMES:
                sys.setrecursionlimit(FRAMES)
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and sys.getrecursionlimit() == max(_saved, FRAMES):
                sys.setrecursionlimit(_saved)


def with_enough_frames(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`enough_frames`; running out of them even so is
    :class:`~tidegate.spec.errors.StatementTooComplex`, never a ``RecursionError``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with enough_frames():
            try:
                return fn(*args, **kwargs)
            except RecursionError:
                raise StatementTooComplex("statement nests too deeply") from None

    return wrapper
