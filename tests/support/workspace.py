"""The workspace builder: files written byte-exactly into a (temporary) folder.

``str`` content is written as UTF-8 with no newline translation and ``bytes`` as given, so
CRLF, lone ``\\r``, U+2028 and a BOM reach the disk unchanged. Rewriting an existing file
always moves its mtime forward: the index re-reads a file only when its stat changed (SPEC
§4), and two same-size writes within one file-system clock tick would otherwise look
untouched. Every language-server test roots its server in a folder built here under
pytest's ``tmp_path`` — never in the checkout; the core and robustness suites write their
files with :func:`write_files` too.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["build_workspace", "event_kinds", "sha256", "write", "write_files"]


def write(root: Path, rel: str, content: str | bytes) -> Path:
    """Write one file under ``root`` (parents created; mtime moved forward on a rewrite)."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    before = path.stat().st_mtime_ns if path.exists() else None
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    if before is not None and path.stat().st_mtime_ns <= before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))
    return path


def write_files(root: Path, files: Mapping[str, str | bytes]) -> None:
    """Write each file of ``files`` (path relative to ``root`` -> content) with :func:`write`."""
    for rel, content in files.items():
        write(root, rel, content)


def build_workspace(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write ``files`` (path relative to ``root`` -> content) and return the resolved root."""
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    write_files(root, files)
    return root


def sha256(data: str | bytes) -> str:
    """Lowercase hex sha256 of raw bytes (``str`` is encoded as UTF-8 first)."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def event_kinds(root: Path) -> list[str]:
    """The event log's kinds, oldest first, read from ``root``'s index: ``GROUNDING_INDEX`` when
    set (the PostgreSQL run of the suite), else ``.grounding/index.sqlite``.
    """
    from grounding_core.store import Store

    store = Store(os.environ.get("GROUNDING_INDEX") or str(root / ".grounding" / "index.sqlite"))
    try:
        return [e.kind for e in store.events()]
    finally:
        store.close()
