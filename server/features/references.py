"""Reference lenses on evidence lines and ``grounding.showReferences`` (SPEC §10; issue 12).

``textDocument/codeLens`` on an evidence file (or a ``grounding-evidence:`` document or a
version copy of one version) puts one lens on each line that drafts cite, titled
``cited by 3 drafts, 1 stale`` (``cited by 1 draft``); stale drafts cite the line through a
version that is no longer the newest. The drafts are the open drafts (their editor text) and
the draft files on disk that are not open, as for ``textDocument/references``; a citation
counts for a line when :func:`grounding_core.navigate.cited_line` maps it there (its own line
in this version, else the line of this version holding exactly its cited text). The lens's
command ``grounding.showReferences [uri, line]`` (0-based line) returns the citing
locations, the answer of ``textDocument/references`` without the declaration.

The cost is one parse per draft that changed (never a walk of the evidence corpus): each
draft's citations are kept in a bounded cache (:class:`DraftCitations`) keyed by the file's
stat key (SPEC §4: size, mtime, ctime, inode) for drafts on disk and by the text's hash for
open drafts, so a lens request over an unchanged workspace stats the drafts and reads none;
the lens reads no evidence other than the version shown and the versions the drafts cite.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

from grounding_core.drafts import draft_kind, parse_draft
from grounding_core.index import VersionRecord
from grounding_core.model import CitationRef
from grounding_core.navigate import cited_line
from grounding_core.scan import StatKey
from server.convert import lsp_line_location
from server.documents import DocumentSnapshot
from server.features import navigation, versions
from server.protocol import parse_version_uri
from server.session import IndexView, Session

__all__ = ["DRAFT_CACHE_SIZE", "SHOW_REFERENCES", "Citations", "DraftCitations", "LineCitations", "code_lens",
           "count_citations", "lens_title", "show_references"]

SHOW_REFERENCES = "grounding.showReferences"


@dataclass(frozen=True, slots=True)
class LineCitations:
    """Who cites one evidence line: ``drafts`` citing it, ``stale`` of them through a version
    that is not the newest (1-based ``line``).
    """

    line: int
    drafts: int
    stale: int


Citations = tuple[tuple[CitationRef, str | None], ...]
"""A draft's text citations: (citation, quote) per claim that has one, in draft order."""

DRAFT_CACHE_SIZE = 4096
"""Drafts whose citations :class:`DraftCitations` keeps (least recently used dropped first)."""


def citations_of(text: str, rel: str) -> Citations:
    """The citations of a draft's text (parsed as its path's kind says)."""
    draft = parse_draft(text, draft_kind(rel))
    return tuple((claim.citation, claim.quote) for claim in draft.claims if claim.citation is not None)


class DraftCitations:
    """A bounded cache of drafts' citations for the reference lens: one entry per draft (at
    most ``size``, least recently used dropped first; worker threads share it under a lock),
    each kept with the stamp it was parsed at.

    :meth:`on_disk` stamps a file with its stat key (SPEC §4) and reads and parses it only when
    the key changed; a file changed within the last 100 ms is parsed but not kept (a same-size
    rewrite inside one timestamp tick would keep its key: the scan's own rule). :meth:`open`
    stamps an editor buffer with its text hash.
    """

    def __init__(self, size: int = DRAFT_CACHE_SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[str, tuple[object, Citations]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def _get(self, key: str, stamp: object) -> Citations | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None or found[0] != stamp:
                return None
            self._entries.move_to_end(key)
            return found[1]

    def _put(self, key: str, stamp: object, value: Citations) -> None:
        with self._lock:
            self._entries[key] = (stamp, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def open(self, uri: str, text_hash: str, text: str, rel: str) -> Citations:
        """The citations of an open draft's buffer ``text`` (hash ``text_hash``)."""
        found = self._get(uri, text_hash)
        if found is None:
            found = citations_of(text, rel)
            self._put(uri, text_hash, found)
        return found

    def on_disk(self, path: str, rel: str, read: Callable[[str], str | None]) -> Citations | None:
        """The citations of the draft file at absolute ``path`` (``rel`` to the workspace
        root, read with ``read``), or None when it cannot be read.
        """
        try:
            key = StatKey.of(os.stat(path))
        except OSError:
            return None
        found = self._get(path, key)
        if found is not None:
            return found
        text = read(rel)
        if text is None:
            return None
        found = citations_of(text, rel)
        if not key.fresh(time.time_ns()):
            self._put(path, key, found)
        return found


_CACHE = DraftCitations()
"""The server's cache (one process serves one workspace; keys are absolute paths and URIs)."""


def lens_title(found: LineCitations) -> str:
    """``cited by 3 drafts, 1 stale`` / ``cited by 1 draft``."""
    title = f"cited by {found.drafts} draft{'' if found.drafts == 1 else 's'}"
    return title + (f", {found.stale} stale" if found.stale else "")


def _record_of(session: Session, uri: str) -> tuple[str, int] | str | None:
    """``(doc_id, version)`` of a version document, the evidence path of a file, or None."""
    return parse_version_uri(uri) or versions.version_of_file(session, uri) or session.evidence_rel(uri)


def _open_drafts(session: Session) -> list[tuple[DocumentSnapshot, str]]:
    found = []
    for doc_uri in session.open_uris():
        rel = session.draft_rel(doc_uri)
        document = session.document(doc_uri)
        if rel is not None and document is not None:
            found.append((document, rel))
    return found


async def code_lens(session: Session, params: types.CodeLensParams) -> list[types.CodeLens] | None:
    """``textDocument/codeLens`` on an evidence file: one lens per cited line (module docstring)."""
    uri = params.text_document.uri
    view = session.current_view()
    if view is None:
        return None
    which = _record_of(session, uri)
    if which is None:
        return None
    counts = await session.readers.run(_counts, view, which, _open_drafts(session))
    if counts is None:
        return None
    record, lines, found = counts
    return [types.CodeLens(range=lsp_line_location(uri, lines, c.line, session.codec).range,
                           command=types.Command(title=lens_title(c), command=SHOW_REFERENCES,
                                                 arguments=[uri, c.line - 1]))
            for c in found]


def _resolve(view: IndexView, which: tuple[str, int] | str) -> VersionRecord | None:
    if isinstance(which, tuple):
        return view.snapshot.record(*which)
    return view.snapshot.record_for_path(which)


def _counts(view: IndexView, which: tuple[str, int] | str, open_drafts: list[tuple[DocumentSnapshot, str]]
            ) -> tuple[VersionRecord, tuple[str, ...], list[LineCitations]] | None:
    record = _resolve(view, which)
    if record is None:
        return None
    lines = view.snapshot.document(record).lines
    drafts = [_CACHE.open(document.uri, document.text_hash, document.text, rel) for document, rel in open_drafts]
    open_paths = {navigation._fs_key(document.uri) for document, _ in open_drafts}
    for rel in view.discover_drafts():
        if navigation._fs_key(view.root_uri(rel)) in open_paths:
            continue
        found = _CACHE.on_disk(str(view.config.root / rel), rel, view.read_text)
        if found is not None:
            drafts.append(found)
    return record, lines, count_citations(view, record, lines, drafts)


def count_citations(view: IndexView, record: VersionRecord, lines: tuple[str, ...],
                    drafts: list[Citations]) -> list[LineCitations]:
    """Per cited line of ``record`` (whose text has ``lines``): how many of ``drafts`` (each
    draft's :data:`Citations`) cite it and how many of those through a version older than the
    newest; sorted by line. Worker thread.
    """
    positions: dict[str, list[int]] = {}
    for number, text in enumerate(lines, 1):
        positions.setdefault(text, []).append(number)
    found = view.snapshot.newest(record.doc_id)
    newest = found.version if found is not None else record.version
    citing: dict[int, set[int]] = {}
    stale: dict[int, set[int]] = {}
    for n, citations in enumerate(drafts):
        for ref, quote in citations:
            if ref.doc_id != record.doc_id:
                continue
            line = cited_line(ref, quote, record, lines, view.snapshot, positions)
            if line is None:
                continue
            citing.setdefault(line, set()).add(n)
            if ref.version != newest:
                stale.setdefault(line, set()).add(n)
    return [LineCitations(line, len(citing[line]), len(stale.get(line, ()))) for line in sorted(citing)]


async def show_references(session: Session, *args: Any) -> list[types.Location] | None:
    """``grounding.showReferences [uri, line]``: the citations of that line (0-based), as
    ``textDocument/references`` answers them without the declaration.
    """
    if len(args) == 1 and isinstance(args[0], list):
        args = tuple(args[0])
    if len(args) < 2 or not isinstance(args[0], str) or not isinstance(args[1], int) or args[1] < 0:
        from pygls.exceptions import JsonRpcInvalidParams

        raise JsonRpcInvalidParams(f"{SHOW_REFERENCES} takes [uri, line] (line 0-based)")
    params = types.ReferenceParams(text_document=types.TextDocumentIdentifier(uri=args[0]),
                                   position=types.Position(line=args[1], character=0),
                                   context=types.ReferenceContext(include_declaration=False))
    return await navigation.references(session, params)
