"""No input stops ``tidegate up``: arbitrary Unicode (lone surrogates too) at every endpoint.

A lone UTF-16 surrogate is valid JSON (``"\\udc80"``) but no UTF-8 encoder takes
it: before every boundary refused it, ``POST /sql`` with ``SELECT '\\udc80'``
reached the protobuf encoder of a replica link's sender and ended the
controller process (exit code 1). Here a real ``tidegate up`` (python executor,
one replica process) gets Hypothesis' full ``text()`` at every route, in every
SQL position (literals, identifiers, comments, parameters) and on every append
path, and after each request the answer must be typed (a 2xx or a 4xx with an
error type: never a 500, which is what an unexpected exception answers) and the
controller alive; after each property, ``/health`` and a normal query answer.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidegate.commands.control import ControllerInfo

pytestmark = [pytest.mark.processes, pytest.mark.timeout(900)]

TIDEGATE = [sys.executable, "-m", "tidegate"]
LONE = st.sampled_from(["\udc80", "\ud800", "\udfff", "\ud83d"])
"""A lone surrogate: the class of text no encoder takes."""
TEXT = st.text() | st.builds(
    lambda a, s, b: a + s + b, st.text(max_size=5), LONE, st.text(max_size=5)
)
"""Any text, and often text with a lone surrogate in it."""
PROPERTY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


class Up:
    """A running ``tidegate up`` and a raw HTTP client of its control endpoint."""

    def __init__(self, proc: subprocess.Popen[bytes], data: Path, log: Path) -> None:
        self.proc, self.data, self.log = proc, data, log
        self.info = ControllerInfo.read(data)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request (a body of arbitrary JSON, surrogates escaped); the status and JSON."""
        host, _, port = self.info.address.rpartition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            raw = b"" if body is None else json.dumps(body).encode("ascii")
            headers = {"Authorization": f"Bearer {self.info.token}"}
            conn.request(method, path, body=raw, headers=headers)
            response = conn.getresponse()
            data = response.read()
            if response.getheader("content-type", "").startswith("application/x-ndjson"):
                return response.status, {"stream": True}
            return response.status, json.loads(data or b"{}")
        finally:
            conn.close()

    def typed(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """A request whose answer must be typed, with the controller alive after it."""
        status, answer = self.request(method, path, body)
        assert self.proc.poll() is None, self.tail()
        assert status < 500, (path, body, status, answer)
        if status >= 400:
            assert isinstance(answer["error"]["type"], str) and answer["error"]["type"]
        return status, answer

    def sql(self, text: str, params: list[Any] | None = None) -> tuple[int, Any]:
        body: dict[str, Any] = {"sql": text}
        if params is not None:
            body["params"] = params
        return self.typed("POST", "/sql", body)

    def alive(self) -> None:
        """``/health`` and a normal query answer."""
        assert self.proc.poll() is None, self.tail()
        status, health = self.request("GET", "/health")
        assert status == 200 and health["result"]["ok"] is True, health
        status, answer = self.sql("SELECT 1 + 1 AS two")
        assert status == 200 and answer["result"]["rows"] == [[2]], answer

    def tail(self) -> str:
        return f"tidegate up exited with {self.proc.returncode}: " + self.log.read_text()[-3000:]


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, e2e: Any) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("unicode")
    data, log = root / "data", root / "up.log"
    with e2e.up_process(data, log) as proc:
        live = Up(proc, data, log)
        for statement in (
            "CREATE TABLE t (k text NOT NULL, v text, n bigint)",
            "CREATE INDEX t_k ON t (k)",
            "INSERT INTO t VALUES ('a', 'b', 1)",
        ):
            status, answer = live.sql(statement)
            assert status == 200, answer
        yield live


def test_a_lone_surrogate_in_sql_is_refused_and_up_lives(up: Up) -> None:
    """The reproducer: before, this request made ``tidegate up`` exit with code 1."""
    status, answer = up.sql("SELECT '\udc80'")
    assert status == 400
    assert answer["error"]["type"] == "InvalidText"
    assert "U+DC80" in answer["error"]["message"]
    up.alive()


def test_a_key_peek_with_a_lone_surrogate_is_refused_and_up_lives(up: Up) -> None:
    status, answer = up.typed("POST", "/peek", {"name": "t_k", "key": ["\udc80"]})
    assert status == 400 and answer["error"]["type"] == "InvalidText", answer
    up.alive()


@PROPERTY
@given(text=TEXT, where=st.sampled_from(["literal", "identifier", "comment", "raw", "param"]))
def test_any_text_in_any_sql_position_gets_a_typed_answer(up: Up, text: str, where: str) -> None:
    if where == "literal":
        up.sql("SELECT '" + text.replace("'", "''") + "' AS x")
        up.sql("INSERT INTO t VALUES ('k', '" + text.replace("'", "''") + "', 2)")
    elif where == "identifier":
        quoted = '"' + text.replace('"', '""') + '"'
        up.sql(f"SELECT 1 AS {quoted}")
        up.sql(f"SELECT * FROM {quoted}")
    elif where == "comment":
        up.sql(f"SELECT 1 -- {text}\n")
        up.sql("SELECT /* " + text.replace("*/", "") + " */ 1")
    elif where == "raw":
        up.sql(text)
    else:
        up.sql("SELECT $1::text AS x", [text])
        up.sql("INSERT INTO t VALUES ($1, $2, 3)", [text, text])
    up.alive()


ROUTES: list[tuple[str, str, list[str]]] = [
    ("GET", "/health", []),
    ("GET", "/status", ["describe"]),
    ("POST", "/describe", ["name"]),
    ("GET", "/replicas", []),
    ("POST", "/replica-add", ["name", "address"]),
    ("POST", "/replica-drop", ["name"]),
    ("POST", "/peek", ["name", "at", "key"]),
    ("POST", "/copy-to", ["name", "url", "at"]),
    ("POST", "/append", ["table", "rows"]),
    ("POST", "/sql", ["sql", "params"]),
    ("POST", "/subscribe", ["name", "as_of"]),
    ("POST", "/create-table", ["name", "columns"]),
    ("POST", "/create-index", ["on", "keys", "name"]),
    ("POST", "/create-view", ["name", "from", "columns"]),
    ("POST", "/drop", ["name", "cascade"]),
    ("POST", "/create-source", ["name", "connection"]),
    ("POST", "/create-sink", ["name", "from", "connection"]),
    ("POST", "/read-policy", ["name", "policy"]),
    ("POST", "/no-such-route", ["x"]),
]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


@PROPERTY
@given(data=st.data())
def test_any_text_at_any_route_gets_a_typed_answer(up: Up, data: st.DataObject) -> None:
    method, path, fields = data.draw(st.sampled_from(ROUTES))
    body: dict[str, Any] = {}
    for f in fields:
        value = data.draw(
            st.none()
            | TEXT
            | JSON
            | st.lists(TEXT, max_size=3)
            | st.lists(st.lists(TEXT | st.integers(), max_size=3), max_size=3)
        )
        if f == "name" and path in ("/peek", "/append", "/subscribe", "/create-index"):
            value = data.draw(st.sampled_from(["t", "t_k"]) | TEXT)
        if f in ("table", "on", "from"):
            value = data.draw(st.sampled_from(["t", "t_k"]) | TEXT)
        if f == "address":  # never a managed replica (no process to start)
            value = data.draw(TEXT.filter(bool))
        body[f] = value
    if path == "/subscribe" and body.get("name") in ("t", "t_k"):
        body["name"] = body["name"] + "\udc80"  # a stream that answered would never end
    extra = data.draw(st.dictionaries(TEXT, JSON, max_size=2))
    body.update({k: v for k, v in extra.items() if k not in body})
    status, _ = up.typed(method, path, body)
    if path == "/replica-add" and status == 200:
        up.typed("POST", "/replica-drop", {"name": body["name"]})
    if path == "/create-table" and status == 200:
        up.typed("POST", "/drop", {"name": body["name"], "cascade": True})
    up.alive()


@PROPERTY
@given(row=st.lists(TEXT | st.none() | st.integers(), min_size=0, max_size=4))
def test_any_text_on_every_append_path_gets_a_typed_answer(up: Up, row: list[Any]) -> None:
    up.typed("POST", "/append", {"table": "t", "rows": [row]})
    up.typed("POST", "/append", {"table": "t", "rows": [[row, 1]]})
    if len(row) == 3:
        up.sql("INSERT INTO t VALUES ($1, $2, $3)", row)
    up.typed("POST", "/peek", {"name": "t_k", "key": row[:1]})
    up.alive()


def test_the_table_holds_no_text_that_is_not_valid_unicode(up: Up) -> None:
    """Whatever was accepted above is readable, as valid Unicode, by a normal query."""
    status, answer = up.sql("SELECT k, v FROM t")
    assert status == 200, answer
    for row in answer["result"]["rows"]:
        for value in row:
            assert value is None or isinstance(value.encode("utf-8"), bytes)
    up.alive()
