"""Diagnostics for drafts and evidence files (SPEC §7, §10).

Drafts are checked on open and save at once, on change after a short debounce; each check
runs in a worker thread on a frozen snapshot and its result is dropped if the document moved
on meanwhile (no stale squiggles). After every index change all open drafts are re-checked.

Mode: pull (``textDocument/diagnostic`` + ``workspace/diagnostic/refresh``) when the client
offers both, push (``publishDiagnostics``) otherwise. Evidence files always get pushed
diagnostics (they need not be open): GR201–GR204 and, for every conflicting key of the
active index, a ``field-conflict`` on each conflicting line with the others as related
information. Closed drafts are cleared.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.capabilities import get_capability

from grounding_core.conflicts import all_conflicts
from grounding_core.index import KeyedLine
from grounding_core.model import Finding, Location, Severity, Span
from grounding_core.store import ScanResult
from grounding_core.text import normalize, split_lines
from server.convert import lsp_diagnostic

if TYPE_CHECKING:
    from server.app import GroundingServer, ServerState
    from server.documents import DocumentSnapshot
    from server.engine import DraftResult

logger = logging.getLogger(__name__)

DEBOUNCE_SECONDS = 0.15


def register(server: GroundingServer, state: ServerState) -> None:
    engine = state.engine
    pending: dict[str, asyncio.Task[None]] = {}
    generation: dict[str, int] = {}
    evidence_published: dict[str, tuple[Finding, ...]] = {}
    """Evidence URI -> the findings last published for it (unchanged ones are not re-sent)."""

    def pull_mode() -> bool:
        """Pull when the client offers ``textDocument/diagnostic`` and the refresh request.

        Read from the ``initialize`` capabilities at each use, not from a flag set by an
        ``initialized`` listener: that listener runs only after the initial index, and a
        draft opened (or pulled) meanwhile would be pushed to (or get an empty report).
        """
        caps = server.client_capabilities
        return bool(get_capability(caps, "text_document.diagnostic", None)) and bool(
            get_capability(caps, "workspace.diagnostics.refresh_support", False))

    def lines_of(rel_to_root: str) -> Sequence[str]:
        assert engine.workspace is not None
        return _file_lines(str(engine.workspace.config.root / rel_to_root))

    def diagnostics_of(result: DraftResult) -> list[types.Diagnostic]:
        related = bool(get_capability(server.client_capabilities,
                                      "text_document.publish_diagnostics.related_information", True))
        snap = result.snapshot
        findings = result.report.findings
        shown = _most_severe(findings, MAX_DIAGNOSTICS)
        out = [lsp_diagnostic(f, snap.lines, snap.codec, engine.root_uri_of, lines_of, related)
               for f in shown]
        if len(findings) > len(shown):
            out.append(types.Diagnostic(
                range=types.Range(types.Position(0, 0), types.Position(0, 0)),
                message=f"{len(findings) - len(shown)} more findings are not shown in the editor;"
                " run 'grounding check' on this draft to see them all.",
                severity=types.DiagnosticSeverity.Information, source="grounding"))
        return out

    def publish(uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
        server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics))

    async def check(snapshot: DocumentSnapshot, rel: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        await engine.indexed.wait()
        gen = engine.index_generation
        result = await asyncio.to_thread(engine.check_snapshot, snapshot, rel)
        if not state.is_current(snapshot):
            return  # the editor moved on; a newer check is scheduled
        generation[snapshot.uri] = gen
        await engine.set_result(snapshot.uri, result)
        if not pull_mode():
            publish(snapshot.uri, snapshot.version, diagnostics_of(result))

    def schedule(snapshot: DocumentSnapshot, rel: str, delay: float) -> None:
        old = pending.pop(snapshot.uri, None)
        if old is not None and not old.done():
            old.cancel()
        task = asyncio.get_running_loop().create_task(check(snapshot, rel, delay))
        pending[snapshot.uri] = task
        task.add_done_callback(lambda t, uri=snapshot.uri: _log_failure(t, uri))

    @state.on_initialized
    def log_mode(ls: GroundingServer) -> None:
        logger.info("diagnostics mode: %s", "pull" if pull_mode() else "push")

    @state.on_document
    async def on_document(ls: GroundingServer, event: object) -> None:
        kind, uri, snapshot = event.kind, event.uri, event.snapshot  # type: ignore[attr-defined]
        if kind == "close":
            task = pending.pop(uri, None)
            if task is not None:
                task.cancel()
            if engine.draft_rel(uri) is not None or uri in engine.results:
                await engine.set_result(uri, None)
                if not pull_mode():
                    publish(uri, None, [])
            return
        rel = engine.draft_rel(uri)
        if rel is None:
            await engine.indexed.wait()
            rel = engine.draft_rel(uri)
            if rel is None:
                return
        schedule(snapshot, rel, DEBOUNCE_SECONDS if kind == "change" else 0.0)

    @engine.on_index
    async def after_index(result: ScanResult) -> None:
        publish_evidence(result)
        for uri in list(server.workspace.text_documents):
            rel = engine.draft_rel(uri)
            snapshot = state.snapshot(uri)
            if rel is not None and snapshot is not None:
                schedule(snapshot, rel, 0.0)
        if pull_mode():
            try:
                server.workspace_diagnostic_refresh(None)
            except Exception:
                logger.info("workspace/diagnostic/refresh failed")

    def publish_evidence(result: ScanResult) -> None:
        assert engine.workspace is not None
        config = engine.workspace.config
        by_path: dict[str, list[Finding]] = {p: list(fs) for p, fs in result.evidence.items()}
        for conflict in all_conflicts(result.state, engine.today()):
            message = conflict.describe()  # once per conflict, not per line
            related_for = _related_by_value(conflict.lines, config.evidence_display)
            for kl in conflict.lines:
                if kl.path not in by_path:
                    continue
                text = result.state.document(result.state.record(kl.doc_id, kl.version)).lines[kl.line - 1]  # type: ignore[arg-type]
                by_path[kl.path].append(Finding(
                    "field-conflict", Span.line(kl.line - 1, 0, len(text)), message,
                    hint="Correct or revoke one of the sources; Grounding never picks a side.",
                    related=related_for(kl),
                ))
        now: dict[str, tuple[Finding, ...]] = {}
        for rel, findings in by_path.items():
            uri = engine.evidence_uri(rel)
            if not findings:
                continue
            now[uri] = tuple(findings)
            if evidence_published.get(uri) == now[uri] and rel not in result.changed:
                continue  # same findings on an unchanged file: nothing to re-send
            full = config.evidence_root / rel
            # A refused symlink may point outside the evidence root: never read it (SPEC §2);
            # its findings sit at 1:1, which needs no line text.
            inside = Path(os.path.realpath(full)).is_relative_to(config.evidence_root)
            lines = _file_lines(str(full), fresh=True) if inside else ()
            publish(uri, None, [lsp_diagnostic(f, lines, server.position_codec, engine.root_uri_of,
                                               lines_of) for f in findings])
        for uri in set(evidence_published) - set(now):
            publish(uri, None, [])
        evidence_published.clear()
        evidence_published.update(now)

    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier="grounding", inter_file_dependencies=True,
                                workspace_diagnostics=False),
    )
    async def pull(ls: GroundingServer, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
        uri = params.text_document.uri
        if not pull_mode():
            return types.RelatedFullDocumentDiagnosticReport(items=[])
        snapshot = state.snapshot(uri)
        if snapshot is None:
            return types.RelatedFullDocumentDiagnosticReport(items=[])
        await engine.indexed.wait()  # before it, the workspace may not be open: no draft_rel
        rel = engine.draft_rel(uri)
        if rel is None:
            return types.RelatedFullDocumentDiagnosticReport(items=[])
        result = engine.result_for(uri)
        if (result is None or result.snapshot.version != snapshot.version
                or result.snapshot.text != snapshot.text
                or generation.get(uri) != engine.index_generation):
            gen = engine.index_generation
            result = await asyncio.to_thread(engine.check_snapshot, snapshot, rel)
            generation[uri] = gen
            if state.is_current(snapshot):
                await engine.set_result(uri, result)
        return types.RelatedFullDocumentDiagnosticReport(items=diagnostics_of(result))


MAX_DIAGNOSTICS = 1000
"""Diagnostics published for one draft; errors first. A pasted log can hold 100k sentences,
and publishing each would stall the client; the rest are counted in one information item."""


def _most_severe(findings: Sequence[Finding], limit: int) -> list[Finding]:
    if len(findings) <= limit:
        return list(findings)
    order = [Severity.ERROR, Severity.WARNING, Severity.INFORMATION, Severity.HINT]
    ranked = sorted(findings, key=lambda f: order.index(f.effective_severity))[:limit]
    keep = set(map(id, ranked))
    return [f for f in findings if id(f) in keep]


MAX_RELATED = 20
"""Related sources listed on one evidence conflict diagnostic; a key shared by thousands of
lines would otherwise make the diagnostics grow with the square of the group."""


def _related_by_value(lines: Sequence[KeyedLine],
                      display: Callable[[str], str]) -> Callable[[KeyedLine], tuple[Location, ...]]:
    """For each line of a conflict, up to :data:`MAX_RELATED` other sources, those that
    disagree with it first. Linear in the conflict's size: each distinct value keeps only its
    first ``MAX_RELATED + 1`` lines, so a key shared by thousands of lines stays cheap.
    """
    groups: dict[str, list[KeyedLine]] = {}
    for kl in lines:
        group = groups.setdefault(normalize(kl.value), [])
        if len(group) <= MAX_RELATED:
            group.append(kl)
    cache: dict[str, list[KeyedLine]] = {}

    def related(this: KeyedLine) -> tuple[Location, ...]:
        mine = normalize(this.value)
        ordered = cache.get(mine)
        if ordered is None:
            others = (o for value, g in groups.items() if value != mine for o in g)
            ordered = list(itertools.islice(others, MAX_RELATED + 1))
            ordered += groups.get(mine, [])[: MAX_RELATED + 1]
            cache[mine] = ordered
        chosen = [o for o in ordered if o is not this][:MAX_RELATED]
        return tuple(Location(display(o.path), o.line, f"{o.field}：{o.value}") for o in chosen)

    return related


def _log_failure(task: asyncio.Task[None], uri: str) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        logger.error("checking %s failed", uri, exc_info=exc)


_FILE_CACHE_SIZE = 256


@lru_cache(maxsize=_FILE_CACHE_SIZE)
def _cached_lines(path: str, mtime_ns: int) -> tuple[str, ...]:
    try:
        data = open(path, "rb").read()
    except OSError:
        return ()
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return tuple(split_lines(text))


def _file_lines(path: str, fresh: bool = False) -> tuple[str, ...]:
    """Lines of a file on disk (for converting related/evidence ranges), cached by mtime."""
    import os

    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return ()
    return _cached_lines(path, mtime)
