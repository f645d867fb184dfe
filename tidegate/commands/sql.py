"""``tidegate sql``: a SQL shell and script runner against a running ``tidegate up``.

::

    tidegate sql                          # interactive: statements end with ';'
    tidegate sql -c "SELECT * FROM t"     # one or more statements
    tidegate sql -f setup.sql --json      # a script; one JSON object per statement

Statements are split here and sent one at a time to the controller's
control endpoint (``POST /sql``, see :mod:`.service`), which runs them with
``Environment.execute``. Results print as aligned tables (``--json``: one
JSON object per statement and line; ``--csv``: header and rows). Errors print
as PostgreSQL's do (message, the line with a caret, a hint); a script stops at
the first one (exit status 1).

``SUBSCRIBE`` streams (``POST /sql`` with ``"stream": true``): its rows print as
they arrive, tab-separated under a line of column names (``--csv``: CSV;
``--json``: one object per row), ``mz_timestamp``, ``mz_diff`` (``WITH
(PROGRESS)``: ``mz_progressed`` too, and a progress row each time the frontier
moves), then the columns, until it ends or Ctrl-C, which ends it cleanly: the
controller drops it and the shell, or the script, goes on with the next statement.

In the shell (line editing and history with ``readline``, kept in
``~/.tidegate_sql_history``): ``\\d`` lists the objects, ``\\d NAME`` describes
one, ``\\timing`` toggles the time each statement took, ``\\q`` quits.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from tidegate.runtime.defaults import default_data_dir

__all__ = ["add_parser", "run_sql"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sql",
        help="a SQL shell (or -c/-f scripts) against a running tidegate up",
        description="Run SQL against the controller serving --data-dir. Without -c or -f: an "
        "interactive shell (a terminal) or the statements on standard input.",
    )
    p.add_argument(
        "-c",
        "--command",
        dest="commands",
        action="append",
        metavar="SQL",
        help="statement(s) to run (repeatable)",
    )
    p.add_argument(
        "-f",
        "--file",
        dest="files",
        action="append",
        metavar="FILE",
        help='a file of statements ("-" reads stdin; repeatable)',
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object per statement")
    out.add_argument("--csv", action="store_true", help="rows as CSV, with a header")
    p.add_argument(
        "--data-dir",
        default=default_data_dir(),
        help="default: $TIDEGATE_DATA_DIR, else ./tidegate-data",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for an answer")
    p.add_argument("--timing", action="store_true", help="print how long each statement took")
    p.set_defaults(func=run_sql)


class _Shell:
    def __init__(self, args: argparse.Namespace) -> None:
        from .control import ControlClient

        self.args = args
        self.client = ControlClient.for_data_dir(args.data_dir, timeout=args.timeout)
        self.timing = bool(args.timing)

    def run_text(self, text: str) -> bool:
        """Run every statement of ``text``; False at the first error (printed)."""
        from tidegate.spec.errors import SqlError

        try:
            statements = split_statements(text)
        except SqlError as e:
            print(e.render(), file=sys.stderr)
            return False
        return all(self.run_one(stmt) for stmt, _offset in statements)

    def run_one(self, stmt: str) -> bool:
        from .control import ControlError

        if _SUBSCRIBE.match(stmt):
            return self.subscribe(stmt)
        started = time.perf_counter()
        try:
            result = self.client.call("POST", "/sql", {"sql": stmt})
        except ControlError as e:
            message = e.message if e.message.startswith("ERROR:") else f"ERROR:  {e.message}"
            print(message, file=sys.stderr)
            return False
        elapsed = time.perf_counter() - started
        self.show(result)
        if self.timing:
            print(f"Time: {elapsed * 1000:.3f} ms")
        return True

    def subscribe(self, stmt: str) -> bool:
        """Print a ``SUBSCRIBE``'s rows as they come (``POST /sql`` streamed) until it ends or
        Ctrl-C, which ends it cleanly (the controller drops it) and counts as its end."""
        from .control import ControlError

        out = _RowPrinter(self.args)
        lines = self.client.stream("POST", "/sql", {"sql": stmt, "stream": True})
        try:
            for line in lines:
                kind, payload = line.get("type"), line.get("payload")
                if kind == "Rows":
                    out.header([c["name"] for c in payload["columns"]])
                elif kind == "Row":
                    out.row(payload)
                elif kind == "Notice":
                    print(f"{payload['severity']}:  {payload['message']}", file=sys.stderr)
                elif kind == "CommandComplete" and not self.args.json and not self.args.csv:
                    print(payload)
                elif kind == "Error" or "error" in line:
                    err = payload if kind == "Error" else line["error"]
                    message = err["message"]
                    if not message.startswith("ERROR:"):
                        message = f"ERROR:  {message}"
                    print(message, file=sys.stderr)
                    return False
        except KeyboardInterrupt:
            print(f"SUBSCRIBE stopped (Ctrl-C) after {out.rows} row(s)", file=sys.stderr)
        except ControlError as e:
            print(f"ERROR:  {e.message}", file=sys.stderr)
            return False
        finally:
            lines.close()  # ends the stream: the controller drops the subscribe
        return True

    def show(self, result: dict[str, Any]) -> None:
        if self.args.json:
            print(json.dumps(result))
            return
        columns, rows = result.get("columns") or [], result.get("rows") or []
        if self.args.csv:
            if columns:
                buf = io.StringIO()
                w = csv.writer(buf, lineterminator="\n")
                w.writerow(columns)
                w.writerows(rows)
                sys.stdout.write(buf.getvalue())
            return
        if result.get("notice"):
            print(f"NOTICE:  {result['notice']}", file=sys.stderr)
        if columns:
            print(format_rows(columns, rows, result.get("types")))
            n = len(rows)
            print(f"({n} row{'' if n == 1 else 's'})\n")
        else:
            print(result.get("status", ""))

    def describe(self, name: str | None) -> None:
        if name is None:
            self.run_one("SHOW OBJECTS")
        else:
            self.run_one(f"SHOW COLUMNS FROM {name}")

    def interactive(self) -> int:
        try:
            import readline

            history = Path.home() / ".tidegate_sql_history"
            with contextlib.suppress(OSError):
                readline.read_history_file(history)
        except ImportError:  # pragma: no cover - platforms without readline
            readline = None  # type: ignore[assignment]
        print('tidegate sql: statements end with ";"; \\d lists objects, \\? for help, \\q quits.')
        buffer = ""
        try:
            while True:
                try:
                    line = input("tidegate=> " if not buffer else "tidegate-> ")
                except EOFError:
                    print()
                    break
                except KeyboardInterrupt:
                    print()
                    buffer = ""
                    continue
                stripped = line.strip()
                if not buffer and stripped.startswith("\\"):
                    if not self.backslash(stripped):
                        break
                    continue
                buffer += line + "\n"
                if _complete(buffer):
                    self.run_text(buffer)
                    buffer = ""
        finally:
            if readline is not None:
                with contextlib.suppress(OSError):
                    readline.write_history_file(history)
        return 0

    def backslash(self, cmd: str) -> bool:
        word, _, rest = cmd.partition(" ")
        if word in ("\\q", "\\quit"):
            return False
        if word == "\\d":
            self.describe(rest.strip() or None)
        elif word == "\\timing":
            self.timing = not self.timing
            print(f"Timing is {'on' if self.timing else 'off'}.")
        elif word in ("\\?", "\\h", "\\help"):
            print(
                "\\d [NAME]  list objects, or describe NAME\n\\timing    toggle timing\n\\q         quit"
            )
        else:
            print(f"invalid command {word}; try \\? for help", file=sys.stderr)
        return True


_SUBSCRIBE = re.compile(r"\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*SUBSCRIBE\b", re.I | re.S)
"""A statement the shell streams: a ``SUBSCRIBE`` (after any comments)."""


class _RowPrinter:
    """A stream's rows as they come: tab-separated under a header line (``NULL`` for null),
    ``--csv`` CSV, ``--json`` one object per row; each line flushed as it is printed."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.columns: list[str] = []
        self.rows = 0

    def header(self, columns: list[str]) -> None:
        self.columns = columns
        if self.args.json:
            return
        self._print(columns)

    def row(self, values: list[Any]) -> None:
        self.rows += 1
        if self.args.json:
            print(json.dumps(dict(zip(self.columns, values, strict=True))), flush=True)
        else:
            self._print(values)

    def _print(self, values: list[Any]) -> None:
        from .values import format_value

        if self.args.csv:
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerow(values)
            sys.stdout.write(buf.getvalue())
            sys.stdout.flush()
        else:
            print("\t".join(format_value(v) for v in values), flush=True)


def _complete(buffer: str) -> bool:
    """Whether ``buffer`` ends a statement: its last token is a ``;`` (not in a string)."""
    from tidegate.spec.errors import SqlError

    if not buffer.rstrip().endswith(";"):
        return False
    try:
        _tokenized(buffer)
    except SqlError:
        return False  # an open string or comment: keep reading
    return True


def split_statements(text: str) -> list[tuple[str, int]]:
    """The statements of ``text`` as ``(statement text, offset)``, as ``tidegate.spec.sql`` splits.

    The same split (sqlglot's PostgreSQL tokenizer: a ``;`` in a string or a
    comment does not split; a test checks they agree), without importing the
    SQL front end: the shell only sends statements. Text without a ``;`` is one
    statement, and so is text whose only ``;`` ends it when nothing can hide it
    (no quotes, dollar quotes or comments): neither is tokenized here. (Text
    the tokenizer would refuse, such as an open string, is then refused by the
    controller, with the same error.)
    """
    if ";" not in text:
        return [(text, 0)] if text.strip() else []
    body = text.rstrip()[:-1]
    if ";" not in body and not any(c in body for c in ("'", '"', "$", "--", "/*")):
        return [(body, 0)] if body.strip() else []
    return _tokenized(text)


def _tokenized(text: str) -> list[tuple[str, int]]:
    from sqlglot import TokenType
    from sqlglot.errors import TokenError

    from tidegate.spec.errors import SqlSyntaxError
    from tidegate.spec.sql._dialect import tokenize

    try:
        tokens = tokenize(text)
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}", sql=text) from None
    out: list[tuple[str, int]] = []
    start = 0
    for t in tokens:
        if t.token_type == TokenType.SEMICOLON:
            out.append((text[start : t.start], start))
            start = t.end + 1
    out.append((text[start:], start))
    return [(s, o) for s, o in out if s.strip()]


def format_rows(columns: list[str], rows: list[list[Any]], types: list[str] | None = None) -> str:
    """psql's aligned format: a header, a rule, then the rows (NULL shown empty)."""
    from .render import psql_table

    return psql_table(columns, rows, types)


def run_sql(args: argparse.Namespace) -> int:
    from .control import NoController

    try:
        shell = _Shell(args)
    except NoController as e:
        print(f"tidegate sql: {e.message}", file=sys.stderr)
        return 3
    if args.commands or args.files:
        for text in args.commands or []:
            if not shell.run_text(text):
                return 1
        for f in args.files or []:
            try:
                text = sys.stdin.read() if f == "-" else Path(f).read_text()
            except OSError as e:
                print(f"tidegate sql: cannot read {f}: {e}", file=sys.stderr)
                return 2
            if not shell.run_text(text):
                return 1
        return 0
    if sys.stdin.isatty():
        return shell.interactive()
    return 0 if shell.run_text(sys.stdin.read()) else 1
