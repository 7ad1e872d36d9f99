"""The workspace builder: files written byte-exactly into a (temporary) folder.

``str`` content is written as UTF-8 with no newline translation and ``bytes`` as given, so
CRLF, lone ``\\r``, U+2028 and a BOM reach the disk unchanged. Every language-server test
roots its server in a folder built here under pytest's ``tmp_path`` — never in the checkout.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

__all__ = ["build_workspace", "sha256", "write"]


def write(root: Path, rel: str, content: str | bytes) -> Path:
    """Write one file under ``root`` (parents created); returns its path."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def build_workspace(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write ``files`` (path relative to ``root`` -> content) and return the resolved root."""
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    for rel, content in files.items():
        write(root, rel, content)
    return root


def sha256(data: str | bytes) -> str:
    """Lowercase hex sha256 of raw bytes (``str`` is encoded as UTF-8 first)."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()
