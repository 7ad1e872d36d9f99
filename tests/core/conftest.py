"""Fixtures of the core suite: throw-away workspaces and the evidence-immutability guard.

``make_workspace`` builds a workspace in ``tmp_path`` from ``{relative path: str | bytes}``
(``str`` is written as UTF-8 bytes exactly as given, so CRLF and U+2028 reach the disk
unchanged), opens it with :meth:`Workspace.open` (keyword overrides as in ``grounding.toml``)
and scans it once.

The session-scoped autouse guard records the sha256 of every file under ``../shared/cases``
and ``examples/evidence`` before the session and fails the run if any of them changed
(SPEC §4: the evidence files are never written).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import CASES, EXAMPLE_EVIDENCE, MakeWorkspace, fixture_fingerprints, write_files

from grounding_core.workspace import Workspace


@pytest.fixture
def make_workspace(tmp_path: Path) -> Iterator[MakeWorkspace]:
    """Build, open and scan a workspace in ``tmp_path``; its stores are closed at teardown."""
    opened: list[Workspace] = []

    def build(files: dict[str, str | bytes], *, scan: bool = True, **overrides: Any) -> Workspace:
        write_files(tmp_path, files)
        ws = Workspace.open(tmp_path, **overrides)
        opened.append(ws)
        if scan:
            ws.scan()
        return ws

    yield build
    for ws in opened:
        ws.store.close()


@pytest.fixture(scope="session", autouse=True)
def evidence_fixtures_are_never_written() -> Iterator[None]:
    """SPEC §4: no test, and nothing the product does, changes a shared evidence fixture."""
    before = fixture_fingerprints()
    assert before, f"no fixtures found under {CASES} or {EXAMPLE_EVIDENCE}"
    yield
    after = fixture_fingerprints()
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert not changed, f"evidence fixtures changed during the session: {changed}"
