"""Applying mechanical fixes (SPEC §10 code actions, ``grounding check --fix``).

Edits carry spans in the draft's text (0-based lines, code-point columns). Applying is pure:
text in, text out; overlapping edits keep the first and drop the rest, so a fix-all never
corrupts a line two findings touch.

Writing a fixed draft is :func:`check_draft_write` then :func:`write_atomic` (issue 13 item
9): the one way Grounding writes a draft, for the CLI and for any server edit it writes
itself.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .model import Edit
from .text import LineIndex


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Apply non-overlapping edits to ``text`` (identical duplicates are applied once).

    Of edits that overlap, the one starting first wins; at the same start, the one given first
    (a stable order, so ``--fix`` does the same thing on every run).
    """
    index = LineIndex(text)
    chosen: list[tuple[int, int, str]] = []
    unique = dict.fromkeys(edits)  # dedupe, keeping the caller's order
    for edit in sorted(unique, key=lambda e: (e.span.start_line, e.span.start_col)):
        start = index.offset(edit.span.start_line, edit.span.start_col)
        end = index.offset(edit.span.end_line, edit.span.end_col)
        if chosen and start < chosen[-1][1]:
            continue
        chosen.append((start, end, edit.new_text))
    for start, end, new_text in reversed(chosen):
        text = text[:start] + new_text + text[end:]
    return text


class UnsafeWrite(ValueError):
    """Grounding refuses to write this draft (it is, or links to, an evidence file)."""


def check_draft_write(path: Path, evidence_root: Path) -> Path:
    """The real file a fix of the draft at ``path`` writes; raises :class:`UnsafeWrite`.

    SPEC §4 (evidence files are never written): refused when ``path`` resolves to a file under
    the evidence root (a symbolic link) or is one inode with an evidence file (a hard link:
    with more than one link, the evidence root is searched for the same device and inode).
    Raises ``OSError`` when ``path`` cannot be examined.
    """
    real = path.resolve()
    if real.is_relative_to(evidence_root):
        raise UnsafeWrite(f"it resolves to {real}, an evidence file; evidence files are never written")
    info = real.stat()
    if info.st_nlink > 1:
        twin = _same_inode_under(evidence_root, info)
        if twin is not None:
            raise UnsafeWrite(f"it is a hard link of the evidence file {twin} (one inode, {info.st_nlink}"
                              " names); evidence files are never written")
    return real


def _same_inode_under(root: Path, info: os.stat_result) -> Path | None:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".grounding")]
        for name in filenames:
            candidate = Path(dirpath) / name
            try:
                found = candidate.lstat()
            except OSError:
                continue
            if (found.st_ino, found.st_dev) == (info.st_ino, info.st_dev):
                return candidate
    return None


def write_atomic(path: Path, data: bytes) -> None:
    """Replace the file at ``path`` with ``data`` atomically, keeping its permission bits.

    A temporary file in the same folder (so the rename never crosses a file system) is
    written, flushed and fsynced, given the old file's mode, then renamed over ``path``; the
    folder is fsynced so the rename survives a crash. A reader sees the old bytes or the new
    ones, never a mix; on any error the old file is untouched and the temporary file removed.
    ``path`` should be a real file (see :func:`check_draft_write`): a symbolic link there is
    replaced, not followed. Other hard links to the old file keep the old content.
    Raises ``OSError``.
    """
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".grounding-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # not every platform can open a folder
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
