"""A reader never creates an index (docs/decisions.md, "Index"): once the file is deleted,
a new reader connection fails instead of leaving an empty database behind (only the writer
creates one).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from grounding_core.sqlite_backend import SqliteBackend


@pytest.mark.sqlite_only
def test_a_reader_never_creates_a_deleted_index(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    backend = SqliteBackend(str(path))
    try:
        backend.create_schema()
        backend.reader().execute("SELECT COUNT(*) FROM events").fetchone()
        backend.writer.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        failures: list[BaseException] = []

        def read() -> None:  # a new thread: a new reader connection
            try:
                backend.reader().execute("SELECT COUNT(*) FROM events").fetchone()
            except sqlite3.Error as exc:
                failures.append(exc)

        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
        assert failures and "unable to open database file" in str(failures[0])
        assert not path.exists()  # no empty index left behind
    finally:
        backend._closed = True
