"""SQLAlchemy 2 (its PostgreSQL dialect over psycopg): Core, reflection and pandas.read_sql."""

from __future__ import annotations

import pandas as pd
import pytest
import sqlalchemy as sa

from .conftest import Server

pytestmark = pytest.mark.timeout(120)


def _engine(pg: Server) -> sa.Engine:
    url = f"postgresql+psycopg://materialize:{pg.password}@{pg.host}:{pg.port}/materialize"
    return sa.create_engine(url, isolation_level="AUTOCOMMIT")


def test_core_reflection_and_pandas(pg_server: Server, name: str) -> None:
    engine = _engine(pg_server)
    with engine.connect() as c:
        c.execute(
            sa.text(f"CREATE TABLE {name} (id bigint NOT NULL, label text, x double precision)")
        )
        c.execute(sa.text(f"CREATE VIEW {name}_v AS SELECT id, x FROM {name} WHERE x > 0"))
        c.execute(sa.text(f"CREATE MATERIALIZED VIEW {name}_m AS SELECT count(*) AS n FROM {name}"))
        meta = sa.MetaData()
        table = sa.Table(name, meta, autoload_with=c)
        assert [col.name for col in table.columns] == ["id", "label", "x"]
        assert isinstance(table.c.id.type, sa.BigInteger) and not table.c.id.nullable
        assert isinstance(table.c.x.type, sa.Double | sa.Float)
        c.execute(sa.insert(table), [{"id": i, "label": f"l{i}", "x": i - 1.5} for i in range(5)])
        got = c.execute(sa.select(table.c.label).where(table.c.id == 3)).all()
        assert got == [("l3",)]
        total = c.execute(
            sa.select(sa.func.count()).select_from(table).where(table.c.x > 0)
        ).scalar()
        assert total == 3
        inspector = sa.inspect(c)
        assert name in inspector.get_table_names()
        assert f"{name}_v" in inspector.get_view_names()
        assert f"{name}_m" in inspector.get_materialized_view_names()
        cols = inspector.get_columns(f"{name}_v")
        assert [col["name"] for col in cols] == ["id", "x"]
        frame = pd.read_sql(sa.text(f"SELECT id, x FROM {name} ORDER BY id"), c)
        assert list(frame["id"]) == [0, 1, 2, 3, 4]
        assert frame["x"].sum() == pytest.approx(2.5)
