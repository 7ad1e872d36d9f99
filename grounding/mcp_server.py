"""``grounding mcp``: the Model Context Protocol server over stdio (SPEC §14; ``grounding[mcp]``).

Tools, each with an input and an output JSON Schema and structured results:

- ``check_answer``: a Markdown draft or JSON answer (and optionally the units the model was
  shown) -> the §9 report (status, coverage, diagnostics with 1-based positions);
- ``cite``: a doc_id and line, an evidence path and line, or search text -> paste-ready
  verified citations (``[^1]: DOC_ID@V:LINE sha256:HEX12 "LINE"``) and JSON claims;
- ``search_evidence``: full-text search over the lines of active documents;
- ``compile_context``: a question -> the units that fit a token budget (SPEC §8), ready to show
  a model and to pass back to ``check_answer`` as ``context``.

A problem with the request (a line that cannot be cited, a bad date, a workspace that cannot
be opened) is a tool result with ``isError: true`` whose text names the finding
(``meta-field: schedule@2:3 is a front-matter line ...``); the server never exits on one. A
failing answer is not a tool error: ``check_answer`` returns its report.

Start-up never waits for the index: the server answers ``initialize`` at once and opens and
scans the workspace in a background thread. Until the first scan commits, results come from
the index as last committed (empty on a first run) and say ``indexing: true`` with a note
"still indexing"; pass ``wait_for_index: true`` to wait (up to 120 s) for the running scan.
After the first scan, each call first rescans incrementally when no scan is running (only
changed files are read), so evidence edits are seen. Every read goes through
:meth:`grounding.api.IndexReader.view`, the one place that knows how the store locks.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from mcp.server import MCPServer
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from grounding_core import cite as core_cite
from grounding_core.context import DEFAULT_LIMIT, DEFAULT_RESERVE

from .api import IndexView, Verifier, citation_model
from .models import Citation, LinesUnit, Report, Skipped, TextUnit

WAIT_SECONDS = 120.0
MAX_NUMBER = 2**31 - 1
"""The largest line, version or region number the tools take (the schema says so; no document has more)."""
"""How long ``wait_for_index`` (and the very first open of the index) may wait."""
SCAN_GATE_ENV = "GROUNDING_MCP_SCAN_GATE"
"""Tests only: a FIFO path; the background scan blocks on it before reading its first file."""
STILL_INDEXING = ("still indexing: the evidence folder is being scanned, so these results come from the"
                  " index as last committed and may miss documents or changes the scan will add;"
                  " call again with wait_for_index=true to wait for it")

Today = Annotated[str | None, Field(description="pin today's date (YYYY-MM-DD) for activity checks")]
Wait = Annotated[bool, Field(description="wait (up to 120 s) for a running index scan before answering")]


class ToolStatus(BaseModel):
    """Common to every result: whether a scan was running, and notes for the caller."""

    indexing: bool = Field(description="a scan was running: results may be incomplete (see notes)")
    notes: list[str] = Field(default_factory=list)


class CheckAnswerResult(Report):
    """The §9 report of the answer, plus ``indexing`` and ``notes``."""

    indexing: bool = Field(description="a scan was running: the verdict used the index as last committed")
    notes: list[str] = Field(default_factory=list)


class CiteResult(ToolStatus):
    citations: list[Citation]
    skipped: list[Skipped] = Field(default_factory=list, description="matching lines that cannot be cited, and why")


class HitOut(BaseModel):
    """One matching line of an active document."""

    doc_id: str
    version: int
    line: int
    text: str = Field(description="the whole line")
    path: str
    field: str | None
    citable: bool = Field(description="False for a meta field, which never supports an answer")
    footnote: str | None = Field(description="the verified citation, when citable")
    reason: str | None = Field(default=None, description="why the line is not citable")


class SearchResult(ToolStatus):
    hits: list[HitOut]


class UnitOut(BaseModel):
    unit: str = Field(description="DOC_ID@VERSION:FIRST-LAST")
    doc_id: str
    version: int
    lines: list[int] = Field(description="[first, last], 1-based, inclusive")
    tokens: int
    text: str | None = Field(description="the unit's lines (kept units only)")


class CompileResult(ToolStatus):
    query: str
    encoding: str
    limit: int
    reserve: int
    input_tokens: int = Field(description="the rendered prompt with the kept units, +BOS/EOS")
    kept: list[UnitOut]
    skipped: list[UnitOut] = Field(description="ranked units that did not fit (skipped whole, never cut)")
    context: list[LinesUnit] = Field(description="the kept units as SPEC §6 units: pass them to check_answer")


M = TypeVar("M", bound=BaseModel)


class ToolFailure(Exception):
    """A request the tools cannot serve: becomes an ``isError`` result naming ``name``."""

    def __init__(self, name: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.name, self.message, self.hint = name, message, hint

    def text(self) -> str:
        return f"{self.name}: {self.message}" + (f" Hint: {self.hint}" if self.hint else "")


def error_result(failure: ToolFailure) -> CallToolResult:
    """An ``isError`` tool result whose text names the finding and how to fix it."""
    return CallToolResult(content=[TextContent(type="text", text=failure.text())], is_error=True)


def ok_result(model: BaseModel) -> CallToolResult:
    data = model.model_dump(mode="json", exclude_none=False)
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
                          structured_content=data)


class Service:
    """The workspace behind the tools: opened and scanned in a background thread.

    ``verifier()`` waits (bounded) for the open; ``view()`` never waits for a scan.
    """

    def __init__(self, root: Path, overrides: dict[str, Any], today: dt.date | None = None) -> None:
        self.root = root
        self._overrides = overrides
        self._today = today
        self._ready = threading.Event()
        self._verifier: Verifier | None = None
        self._error: ToolFailure | None = None
        self._thread = threading.Thread(target=self._open, name="grounding-open", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _open(self) -> None:
        try:
            verifier = Verifier(self.root, scan=False, today=self._today, evidence=self._overrides.get("evidence"))
            if not verifier.config.evidence_root.is_dir():
                raise FileNotFoundError(f"evidence folder {verifier.config.evidence_root} does not exist")
            self._verifier = verifier
            verifier.reader.start_background_scan(_gate_progress())
        except Exception as exc:  # a config error, an unusable index: every tool reports it
            self._error = ToolFailure("invalid-workspace", f"the workspace at {self.root} cannot be used: {exc}",
                                      "fix grounding.toml or the evidence folder, then restart `grounding mcp`")
        finally:
            self._ready.set()

    def verifier(self) -> Verifier:
        if not self._ready.wait(WAIT_SECONDS):
            raise ToolFailure("still-indexing", "the index is still being opened", "call the tool again shortly")
        if self._error is not None:
            raise self._error
        assert self._verifier is not None
        return self._verifier

    def view(self, wait_for_index: bool) -> tuple[Verifier, IndexView, list[str]]:
        verifier = self.verifier()
        reader = verifier.reader
        if wait_for_index and reader.indexing and not reader.wait_idle(WAIT_SECONDS):
            raise ToolFailure("still-indexing", f"the index scan did not finish within {WAIT_SECONDS:.0f} s",
                              "call again later, or without wait_for_index to get the committed results")
        if reader.view().scanned:
            try:
                reader.refresh_if_idle(min_interval=0.0)
            except FileNotFoundError as exc:
                raise ToolFailure("invalid-workspace", str(exc)) from None
        if reader.scan_error is not None and not reader.indexing and not reader.view().scanned:
            raise ToolFailure("invalid-workspace", f"indexing the evidence failed: {reader.scan_error}")
        view = reader.view()
        notes = [STILL_INDEXING] if view.indexing else []
        return verifier, view, notes


def _gate_progress() -> Callable[[int, int, str], None] | None:
    """Tests only (``GROUNDING_MCP_SCAN_GATE``): hold the first scan until the FIFO is opened."""
    gate = os.environ.get(SCAN_GATE_ENV)
    if not gate:
        return None
    passed = threading.Event()

    def progress(done: int, total: int, path: str) -> None:
        if not passed.is_set():
            with open(gate, "rb"):  # a FIFO: blocks until the test opens it for writing
                pass
            passed.set()

    return progress


def _day(today: str | None) -> dt.date | None:
    if today is None:
        return None
    try:
        return dt.date.fromisoformat(today)
    except ValueError:
        raise ToolFailure("invalid-argument", f"today must be YYYY-MM-DD, got {today!r}") from None


def build_server(root: Path, overrides: dict[str, Any] | None = None, today: dt.date | None = None) -> MCPServer:
    """The MCP server for the workspace at ``root``; the index opens when ``service.start()`` runs."""
    service = Service(root, overrides or {}, today)
    server = MCPServer(
        "grounding",
        instructions=(
            "Grounding checks that every claim of an answer cites a whole, current line of an evidence"
            " document that the answer's writer was shown. Find lines with search_evidence or"
            " compile_context, get exact citations with cite, and check a draft or JSON answer with"
            " check_answer before you give it; fix every error it reports. Results say indexing=true"
            " while the evidence is still being indexed."
        ),
        log_level="WARNING",
    )
    server.grounding_service = service  # type: ignore[attr-defined]  # for `serve` and tests

    def guarded(run: Callable[[], BaseModel]) -> CallToolResult:
        try:
            return ok_result(run())
        except ToolFailure as failure:
            return error_result(failure)
        except core_cite.CiteError as exc:
            return error_result(ToolFailure(exc.name, exc.message, exc.hint))

    @server.tool(title="Check an answer")
    def check_answer(
        answer: Annotated[str | dict[str, Any], Field(
            description="a Markdown draft (SPEC §5.1) or a JSON answer (SPEC §5.2), as text or as an object")],
        context: Annotated[list[LinesUnit | TextUnit] | None, Field(
            description="the units the answer was written from (SPEC §6); replaces the answer's own context")] = None,
        kind: Annotated[Literal["auto", "markdown", "json"], Field(
            description="auto: JSON when the answer is an object or starts with '{'")] = "auto",
        path: Annotated[str | None, Field(description="a name for the answer in the report")] = None,
        today: Today = None,
        wait_for_index: Wait = False,
    ) -> Annotated[CallToolResult, CheckAnswerResult]:
        """Check an answer: every claim must cite a verbatim, current, active line that was in its
        context; same-field conflicts, missing fields and budgets too. Returns the SPEC §9 report.
        """
        def run() -> BaseModel:
            verifier, view, notes = service.view(wait_for_index)
            text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, indent=1)
            chosen = None if kind == "auto" else kind
            if chosen is None and not isinstance(answer, str):
                chosen = "json"
            report = verifier.check(text, kind=chosen, context=context, today=_day(today), path=path)
            return CheckAnswerResult(**report.model_dump(), indexing=view.indexing, notes=notes)

        return guarded(run)

    @server.tool(title="Cite an evidence line")
    def cite(
        doc_id: Annotated[str | None, Field(description="the document's doc_id")] = None,
        line: Annotated[int | None, Field(description="1-based line, front matter included", ge=1,
                                          le=MAX_NUMBER)] = None,
        version: Annotated[int | None, Field(description="the version (default: the active one)", ge=1,
                                             le=MAX_NUMBER)] = None,
        path: Annotated[str | None, Field(
            description="an evidence file (relative to the workspace root), instead of doc_id")] = None,
        search: Annotated[str | None, Field(
            description="text the line contains (within doc_id, or across all active documents)")] = None,
        region: Annotated[int | None, Field(
            description="an image region's number N (the rN of DOC_ID@VERSION#rN), with doc_id, instead"
                        " of line", ge=1, le=MAX_NUMBER)] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        today: Today = None,
        wait_for_index: Wait = False,
    ) -> Annotated[CallToolResult, CiteResult]:
        """Paste-ready verified citations of active evidence lines, by doc_id and line, evidence path
        and line, or search text; of an image region's measured attributes by doc_id and region
        (SPEC §12). Lines that cannot support an answer (blank, front matter, meta fields,
        inactive or stale documents) are errors that say why.
        """
        def run() -> BaseModel:
            verifier, view, notes = service.view(wait_for_index)
            if region is not None and (doc_id is None or line is not None or path is not None):
                raise ToolFailure("invalid-argument", "region goes with doc_id (and optionally version),"
                                  " not with line or path")
            if region is not None:
                target: str | None = f"{doc_id}" + (f"@{version}" if version else "") + f"#r{region}"
            elif path is not None:
                if line is None:
                    raise ToolFailure("invalid-argument", "path needs a line")
                target = f"{path}:{line}"
                if verifier.evidence_path(f"{path}:{line}", verifier.config.root) is None:
                    raise ToolFailure("unknown-source", f"{path} is not a file under the evidence folder")
            elif doc_id is not None:
                target = doc_id + (f"@{version}" if version else "") + (f":{line}" if line else "")
            elif search is not None:
                target = None
            else:
                raise ToolFailure("invalid-argument", "give doc_id (with line or search), path and line, or search")
            try:
                result = verifier.cite(target, grep=search, limit=limit, today=_day(today), view=view,
                                       cwd=verifier.config.root)
            except core_cite.CiteError as exc:
                if not view.indexing:
                    raise
                raise ToolFailure(exc.name, f"{exc.message} ({STILL_INDEXING})", exc.hint) from None
            except ValueError as exc:
                raise ToolFailure("invalid-argument", str(exc)) from None
            if view.indexing:
                notes = notes + ["a document that is not indexed yet is reported as unknown-source"]
            return CiteResult(citations=[citation_model(verifier.config, c) for c in result.citations[:limit]],
                              skipped=[Skipped.model_validate(s, from_attributes=True) for s in result.skipped],
                              indexing=view.indexing, notes=notes)

        return guarded(run)

    @server.tool(title="Search the evidence")
    def search_evidence(
        query: Annotated[str, Field(description="words the line contains (each whitespace-separated term must occur)",
                                    min_length=1)],
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        today: Today = None,
        wait_for_index: Wait = False,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Full-text search (SQLite FTS5, trigram: works for Chinese) over the lines of active
        documents, best first, each with its verified citation.
        """
        def run() -> BaseModel:
            verifier, view, notes = service.view(wait_for_index)
            if not query.strip():
                raise ToolFailure("invalid-argument", "the query is empty")
            day = verifier.today(_day(today))
            hits: list[HitOut] = []
            snapshot = view.snapshot
            for hit in snapshot.search(query, limit * 3 + 10):  # lines of active versions only
                if len(hits) >= limit:
                    break
                record = snapshot.record(hit.doc_id, hit.version)
                if record is None or not snapshot.is_active(record, day):
                    continue  # e.g. expired or not yet effective on ``today``
                path = verifier.config.evidence_display(record.path)
                field_line = snapshot.document(record).field_lines.get(hit.line)
                try:
                    c = core_cite.cite_line(snapshot, hit.doc_id, hit.line, day)
                    hits.append(HitOut(doc_id=hit.doc_id, version=hit.version, line=hit.line, text=c.quote,
                                       path=path, field=c.field, citable=True, footnote=c.footnote()))
                except core_cite.CiteError as exc:
                    doc = snapshot.document(record)
                    raw = doc.lines[hit.line - 1] if 0 < hit.line <= len(doc.lines) else hit.text
                    hits.append(HitOut(doc_id=hit.doc_id, version=hit.version, line=hit.line, text=raw,
                                       path=path, field=field_line.field if field_line else None, citable=False,
                                       footnote=None, reason=f"{exc.name}: {exc.message}"))
            return SearchResult(hits=hits, indexing=view.indexing, notes=notes)

        return guarded(run)

    @server.tool(title="Compile a context")
    def compile_context(
        question: Annotated[str, Field(description="the question to answer", min_length=1)],
        query: Annotated[str | None, Field(description="search text (default: the question)")] = None,
        limit: Annotated[int, Field(description="input + output token limit", ge=1)] = DEFAULT_LIMIT,
        reserve: Annotated[int, Field(description="tokens reserved for the answer", ge=1)] = DEFAULT_RESERVE,
        today: Today = None,
        wait_for_index: Wait = False,
    ) -> Annotated[CallToolResult, CompileResult]:
        """The best-ranked whole units of active documents that fit the token budget (SPEC §8): show
        them to the model, then pass ``context`` to check_answer.
        """
        def run() -> BaseModel:
            verifier, view, notes = service.view(wait_for_index)
            if reserve >= limit:
                raise ToolFailure("invalid-argument", f"reserve {reserve} leaves no room under limit {limit}")
            compiled = verifier.compile(question, query=query, limit=limit, reserve=reserve,
                                        today=_day(today), view=view)
            pack = compiled.pack

            def out(unit: Any, cost: int, text: bool) -> UnitOut:
                return UnitOut(unit=unit.id, doc_id=unit.doc_id, version=unit.version,
                               lines=[unit.start_line, unit.end_line], tokens=cost, text=unit.text if text else None)

            return CompileResult(
                query=compiled.query, encoding=pack.encoding, limit=pack.limit, reserve=pack.reserve,
                input_tokens=pack.input_tokens, kept=[out(u.unit, u.cost, True) for u in pack.kept],
                skipped=[out(u.unit, u.cost, False) for u in pack.skipped],
                context=[LinesUnit(doc_id=u.doc_id, version=u.version, lines=[u.start_line, u.end_line])
                         for u in compiled.kept],
                indexing=view.indexing, notes=notes)

        return guarded(run)

    return server


def serve(root: Path, overrides: dict[str, Any] | None = None, today: dt.date | None = None) -> None:
    """Run the server on stdio until the client closes it."""
    server = build_server(root, overrides, today)
    server.grounding_service.start()  # type: ignore[attr-defined]
    server.run("stdio")
