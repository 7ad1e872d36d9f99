"""A workspace: configuration + index + draft discovery, the entry point for CLI and server.

This module does file I/O (reading drafts and context logs); the checks it calls are pure.
Paths in reports are relative to the workspace root, ``/``-separated (SPEC §9).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Config, load_config
from .drafts import ContextSpec, ParsedDraft, draft_kind, parse_draft
from .index import IndexSnapshot
from .model import DraftReport, Finding, Span
from .store import IndexError_, IndexTooNew, ProgressCallback, ScanResult, Store
from .text import is_printable_path, printable_path
from .verify import CompileQuery, Visibility, check_draft

SKIP_DIRS = (".git", ".grounding", "node_modules")


@dataclass
class Workspace:
    """An opened workspace. ``store`` is the persistent index; call :meth:`scan` to update it."""

    config: Config
    store: Store

    warning: str | None = None
    """Set when the workspace opened with a fallback (e.g. an in-memory index)."""

    fallback: bool = False
    """True when the configured index could not be opened and an in-memory index replaces it
    for this run: its log starts empty, so its history (``--at N``) is not the index's."""

    @classmethod
    def open(cls, root: Path, **overrides: object) -> Workspace:
        """Load configuration (raises ConfigError) and open the index.

        When the index file cannot be created or opened (a read-only checkout, a corrupt
        file), the workspace falls back to an in-memory index and sets :attr:`warning`. A
        shared index (a ``postgresql://`` URL) that cannot be reached raises
        :class:`IndexError_` instead: a team's checks must not silently run against another
        state (the language server falls back to the local SQLite file and says so). An
        index written by a newer Grounding raises :class:`~grounding_core.store.IndexTooNew`.
        """
        config = load_config(root)
        if overrides:
            config = config.with_overrides(**overrides)
        try:
            return cls(config, Store.for_config(config))
        except IndexTooNew:
            raise  # a newer Grounding's index is refused, never replaced by memory
        except IndexError_ as exc:
            if config.index_shared:
                raise
            memory = config.with_overrides(index=":memory:")
            ws = cls(memory, Store.for_config(memory))
            ws.warning = f"{exc}; using an in-memory index for this run"
            ws.fallback = True
            return ws

    def scan(self, progress: ProgressCallback | None = None,
             paths: Iterable[str] | None = None, settle: float | None = None,
             lock_wait: float | None = None) -> ScanResult:
        """Update the index (:meth:`Store.scan`): a full walk, or only ``paths`` (relative to
        the evidence root); ``settle`` caps the wait for files still being written,
        ``lock_wait`` the wait for another process's write lock (then :class:`~grounding_core.store.IndexBusy`).
        """
        options: dict[str, Any] = {}  # (Store.scan's keyword defaults stay its own)
        if settle is not None:
            options["settle"] = settle
        if lock_wait is not None:
            options["lock_wait"] = lock_wait
        return self.store.scan(self.config, progress, paths, **options)

    def committed(self) -> ScanResult:
        """The index as last committed, without scanning (no lock needed): what a reader
        checks against while another process holds the write lock (:class:`~grounding_core.store.IndexBusy`).
        """
        return ScanResult(snapshot=self.store.snapshot(), evidence=self.store.evidence_findings())

    def today(self, pinned: dt.date | None = None) -> dt.date:
        return pinned or self.config.today_or()

    # -- drafts ---------------------------------------------------------------------------

    def rel(self, path: Path) -> str:
        """An absolute or cwd-relative path as a ``/``-path relative to the root."""
        full = path.resolve() if not path.is_absolute() else path
        try:
            return full.relative_to(self.config.root).as_posix()
        except ValueError:
            return os.path.relpath(full, self.config.root).replace(os.sep, "/")

    def is_draft(self, rel_path: str) -> bool:
        """SPEC §2: matches a draft glob and is not under the evidence root. A path that no
        file can have (a NUL, e.g. from a ``%00`` in a URI) is not a draft.
        """
        try:
            full = (self.config.root / rel_path).resolve()
        except (OSError, ValueError):
            return False
        if full.is_relative_to(self.config.evidence_root):
            return False
        parts = rel_path.split("/")
        if any(p in SKIP_DIRS for p in parts):
            return False
        return self.config.draft_matches(rel_path)

    def discover_drafts(self) -> list[str]:
        """Every draft under the root, sorted by path (SPEC §2 globs)."""
        root = self.config.root
        out: list[str] = []
        evidence_root = self.config.evidence_root
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            here = Path(dirpath)
            dirnames[:] = sorted(
                d for d in dirnames
                if d not in SKIP_DIRS and (here / d).resolve() != evidence_root
            )
            if here.resolve().is_relative_to(evidence_root):
                dirnames[:] = []
                continue  # files under the evidence root are never drafts (SPEC §2)
            for name in filenames:
                full = here / name
                rel = full.relative_to(root).as_posix()
                if self.config.draft_matches(rel) and not full.is_symlink() and full.is_file():
                    out.append(rel)
        return sorted(out)

    MAX_READ_BYTES = 64 * 1024 * 1024

    def read_text(self, rel_path: str) -> str | None:
        """A UTF-8 regular file inside the workspace root (BOM removed), else None.

        Used for context logs (SPEC §6: relative to the workspace root): a path that resolves
        outside the root, a device or FIFO, a file over 64 MB, or one that is not UTF-8 is
        never read (None, so the caller reports ``invalid-context``).
        """
        try:
            full = (self.config.root / rel_path).resolve()
            if not full.is_relative_to(self.config.root) or not full.is_file():
                return None
            if full.stat().st_size > self.MAX_READ_BYTES:
                return None
            data = full.read_bytes()
        except (OSError, ValueError):
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return text[1:] if text.startswith("\ufeff") else text

    def check_text(
        self,
        rel_path: str,
        text: str,
        state: IndexSnapshot | None = None,
        today: dt.date | None = None,
        compile_query: CompileQuery | None = None,
        count_output: bool = False,
    ) -> DraftReport:
        """Check one draft's text (an editor buffer or a file) against the snapshot ``state``
        (default: the newest); a ``query`` context compiles against that same snapshot.
        """
        draft = parse_draft(text, draft_kind(rel_path))
        if draft.context is not None and draft.context.kind == "query" and draft.context.error is None:
            self.store.build_fts()  # the context is ranked by full-text search: build it first
        return check_draft(
            draft, state or self.store.snapshot(), self.config, self.today(today), rel_path,
            self.read_text, compile_query, count_output=count_output,
        )

    def check_file(self, rel_path: str, state: IndexSnapshot | None = None,
                   today: dt.date | None = None, count_output: bool = False) -> DraftReport:
        """Check a draft file; an unreadable file is one malformed-citation finding.

        A file name that is not valid UTF-8 is not read: its report names the path with the
        undecodable bytes shown as ``\\xNN`` (:func:`~grounding_core.text.printable_path`).
        """
        if not is_printable_path(rel_path):
            return _unreadable_report(
                printable_path(rel_path),
                f"the file name is not valid UTF-8 ({printable_path(rel_path)}, undecodable bytes shown"
                " as \\xNN); the draft was not read",
                "Rename the draft (an archive tool probably wrote its name in GBK or Latin-1).")
        try:
            path = self.config.root / rel_path
            if not path.is_file():
                raise OSError(0, "not a regular file")
            data = path.read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not valid UTF-8"
            return _unreadable_report(rel_path, f"cannot read the draft: {reason}")
        if text.startswith("\ufeff"):
            text = text[1:]
        return self.check_text(rel_path, text, state, today, count_output=count_output)

    def check_all(self, paths: Iterable[str] | None = None, state: IndexSnapshot | None = None,
                  today: dt.date | None = None) -> list[DraftReport]:
        state = state or self.store.snapshot()
        return [self.check_file(p, state, today) for p in (paths or self.discover_drafts())]

    def compile_query(self, spec: ContextSpec, draft: ParsedDraft,
                      state: IndexSnapshot | None = None) -> Visibility:
        """Compile a ``query`` context (SPEC §8) against ``state`` (default: the newest
        snapshot) into X. Full-text rows still pending are built first.
        """
        from .context import compile_context

        self.store.build_fts()
        snapshot = state or self.store.snapshot()
        compiled = compile_context(snapshot, self.config, spec, draft.question or "", self.today())
        return compiled.visibility()


def _unreadable_report(path: str, message: str, hint: str = "Save the draft as UTF-8 text.") -> DraftReport:
    from .model import Status

    return DraftReport(
        path=path, status=Status.ABSTAIN, required_fields=[], covered_fields=[], missing_fields=[],
        field_completeness=True, coverage=1.0, same_key_sources_checked=0,
        findings=[Finding("malformed-citation", Span(0, 0, 0, 0), message, hint=hint)],
    )
