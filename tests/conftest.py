"""Suite-wide fixtures: the index backend the tests run against, and a real PostgreSQL.

``GROUNDING_TEST_BACKEND`` chooses the backend of every index a test opens through the
configuration (``Workspace.open``, ``Store.for_config``, the CLI and the language server in
subprocesses): ``sqlite`` (the default: each workspace's ``.grounding/index.sqlite``) or
``postgres``, where every test gets a fresh schema of the session's PostgreSQL cluster through
``GROUNDING_INDEX`` (the product's own override; subprocesses inherit it), so the same tests
check the shared backend. ``.ci/run`` runs the core suite and the public cases both ways.

Fixtures:

- ``pg_cluster`` (session): a throw-away cluster from ``tests/postgres/cluster.py`` (Debian's
  ``postgresql`` binaries, ``initdb`` into a temporary folder, a free port); the test is skipped,
  saying why, only when the binaries are not installed.
- ``pg_url``: a libpq URL of a fresh, empty schema of that cluster (one index).
- ``store_location``: ``store_location(tmp_path, "name")`` -> an SQLite path, or a fresh
  PostgreSQL schema URL under ``GROUNDING_TEST_BACKEND=postgres`` (for tests that open
  several stores directly).

A test marked ``sqlite_only`` (it opens the SQLite file itself) is skipped in the PostgreSQL
run; the SQLite run covers it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.postgres.cluster import Cluster, find_bindir

BACKEND = os.environ.get("GROUNDING_TEST_BACKEND", "sqlite").strip().lower() or "sqlite"
if BACKEND not in ("sqlite", "postgres"):
    raise pytest.UsageError(f"GROUNDING_TEST_BACKEND={BACKEND!r}: use sqlite or postgres")

NO_POSTGRES = "PostgreSQL binaries (initdb, pg_ctl) not installed: apt-get install postgresql"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(NO_POSTGRES)
    cluster = Cluster(bindir)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    return pg_cluster.schema_url()


@pytest.fixture(autouse=True)
def index_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The backend of this test's indexes (see the module docstring)."""
    monkeypatch.delenv("GROUNDING_INDEX", raising=False)
    if BACKEND == "sqlite":
        return "sqlite"
    if request.node.get_closest_marker("sqlite_only"):
        pytest.skip("opens the SQLite index file itself (covered by the SQLite run)")
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    monkeypatch.setenv("GROUNDING_INDEX", cluster.schema_url())
    return "postgres"


@pytest.fixture
def store_location(index_backend: str, request: pytest.FixtureRequest) -> Callable[[Path, str], str]:
    def location(folder: Path, name: str) -> str:
        if index_backend == "postgres":
            cluster: Cluster = request.getfixturevalue("pg_cluster")
            return cluster.schema_url()
        return str(folder / f"{name}.sqlite")

    return location
