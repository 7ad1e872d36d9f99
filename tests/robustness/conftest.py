"""Fixtures of the robustness suite.

- ``evidence_fixtures_are_never_written`` (session, autouse): the sha256 of every evidence
  fixture (``examples/evidence`` and ``../shared/cases``) before the session and after it;
  the run fails if any changed (SPEC §4: evidence files are never written).
- ``make_workspace``: builds a workspace in ``tmp_path`` from ``{path: str | bytes}``, opens
  it (keyword overrides as in ``grounding.toml``) and scans it once. At teardown it checks
  that every file it wrote still has the bytes it wrote, unless the test changes files
  itself (``make_workspace.mutable()``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grounding_core.workspace import Workspace

from .helpers import EXAMPLES, SHARED_CASES, fingerprints, sha256, write_files


@pytest.fixture(scope="session", autouse=True)
def evidence_fixtures_are_never_written() -> Iterator[None]:
    """SPEC §4: nothing the product does (or this suite does) changes an evidence fixture."""
    bases = (EXAMPLES / "evidence", SHARED_CASES)
    before = fingerprints(*bases)
    assert before, f"no evidence fixtures found under {bases}"
    yield
    after = fingerprints(*bases)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert not changed, f"evidence fixtures changed during the session: {changed}"


class WorkspaceFactory:
    """The ``make_workspace`` fixture (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.opened: list[Workspace] = []
        self.written: dict[Path, str] = {}
        self.checked = True

    def __call__(self, files: dict[str, str | bytes], *, scan: bool = True,
                 **overrides: Any) -> Workspace:
        write_files(self.root, files)
        for rel, content in files.items():
            self.written[self.root / rel] = sha256(content)
        ws = Workspace.open(self.root, **overrides)
        self.opened.append(ws)
        if scan:
            ws.scan()
        return ws

    def mutable(self) -> None:
        """The test edits evidence itself: skip the teardown immutability check."""
        self.checked = False


@pytest.fixture
def make_workspace(tmp_path: Path) -> Iterator[WorkspaceFactory]:
    factory = WorkspaceFactory(tmp_path)
    yield factory
    for ws in factory.opened:
        ws.store.close()
    if factory.checked:
        changed = [str(p) for p, digest in factory.written.items()
                   if p.is_file() and not p.is_symlink() and sha256(p.read_bytes()) != digest]
        assert not changed, f"the product changed files it only had to read: {changed}"
