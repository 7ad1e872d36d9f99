"""A team's roles on a shared index (SPEC §4; docs/decisions.md "A scan's file rows"): a role
granted the index tables' rows, and nothing else on the schema, scans and appends; a scan
stages its file rows in temporary tables of its own session, never in the shared schema.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import psycopg

from grounding_core.config import load_config
from grounding_core.store import Store
from tests.postgres.cluster import Cluster
from tests.support.workspace import build_workspace, write


def test_a_role_with_row_privileges_only_scans_and_its_staging_never_reaches_the_schema(
        pg_cluster: Cluster, tmp_path: Path) -> None:
    schema, role = "t_" + uuid.uuid4().hex[:12], "writer_" + uuid.uuid4().hex[:8]
    root = build_workspace(tmp_path / "ws", {"evidence/通知.md": "- 地点：北门 🎉\r\n"})
    config = load_config(root)
    owner = Store(pg_cluster.schema_url(schema))
    try:
        assert len(owner.scan(config).events) == 1
    finally:
        owner.close()
    pg_cluster.psql(f"CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA {schema} TO {role};"
                    f" GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role};"
                    f" REVOKE CREATE ON SCHEMA {schema} FROM {role}")
    time.sleep(0.15)  # the edit below must be seen as a new stat key after the settle window
    write(root, "evidence/通知.md", "- 地点：南门 🎉\r\n")
    team = Store(pg_cluster.schema_url(schema).replace("postgres@", f"{role}@"))
    try:
        result = team.scan(config)
        assert result.writer is None  # it holds the writer lock: it wrote the scan
        assert [(e.kind, e.doc_id) for e in result.events] == [("import", "通知")]
    finally:
        team.close()
    with psycopg.connect(pg_cluster.url, autocommit=True) as probe:
        tables = {r[0] for r in probe.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))}
    assert "files" in tables and not tables & {"scan_files", "scan_docs"}
