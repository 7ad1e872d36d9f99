"""The Python API: verify an LLM's answer in code (SPEC §14).

``grounding.verify(answer, root=...)`` checks one answer; :class:`Verifier` opens a workspace
and its index once and checks many answers cheaply (each check parses one answer and reads the
frozen index state; nothing is rescanned unless you call :meth:`Verifier.refresh`).

The checks are the core's (``grounding_core.verify.check_draft``): the same findings, status
and coverage as ``grounding check`` and the editor. What this layer adds:

- ``answer`` may be a dict, a JSON string or a pydantic model (SPEC §5.2 wire);
- ``context`` is the list of units the model was shown (SPEC §6 log units — the pipeline's
  retrieved hits); given, it **replaces** any ``context`` the answer declares (the hits are
  what the model saw; an answer cannot widen its own context);
- the report is a typed :class:`grounding.models.Report` (the §9 draft object), whose
  diagnostics carry a JSON Pointer (``/claims/0/quote``) and a content fingerprint.

Threads: a :class:`Verifier` may be used from several threads; checks read an immutable index
state (:class:`IndexView`) and never wait for a scan in progress.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from grounding_core import cite as core_cite
from grounding_core.budget import ContextUnit as CoreContextUnit
from grounding_core.context import DEFAULT_LIMIT, DEFAULT_RESERVE, CompiledContext, compile_context
from grounding_core.drafts import UNIT_RE, ContextSpec, ContextUnitSpec, parse_context_log, parse_draft
from grounding_core.index import IndexSnapshot
from grounding_core.memory import MemoryUnitSpec, is_memory_id, parse_memory_unit
from grounding_core.memory import log_units as memory_log_units
from grounding_core.model import DraftReport, Span
from grounding_core.store import ProgressCallback, ScanResult
from grounding_core.text import LineIndex
from grounding_core.verify import check_draft
from grounding_core.workspace import Workspace

from .models import Citation, Claim, ImageClaim, Report
from .report import draft_json, fingerprints_of

AnswerInput = dict[str, Any] | str | bytes | BaseModel
"""A §5.2 answer: parsed JSON, JSON text, or a pydantic model (e.g. :class:`grounding.models.Answer`)."""

UnitInput = dict[str, Any] | str | BaseModel | CoreContextUnit
"""One context unit: a §6 log unit dict (``{"doc_id", "version", "lines" | "text"}``), a unit
string (``"schedule@2"``, ``"notice@1:1-12"``), a pydantic unit model, or a compiled unit."""

TodayInput = dt.date | str | None


def _require(name: str, value: object, kinds: type | tuple[type, ...], what: str) -> None:
    """TypeError naming the parameter, what it takes and what it got, when ``value`` is not of
    ``kinds`` (a bool is no int).
    """
    allowed = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} {value!r:.80}")


def _date(value: TodayInput) -> dt.date | None:
    if value is None or isinstance(value, dt.date):
        return value
    _require("today", value, str, "a datetime.date, a 'YYYY-MM-DD' string or None")
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"today must be YYYY-MM-DD, got {value!r}") from None


# -- reading the index ---------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexView:
    """What a check reads: one frozen :class:`~grounding_core.index.IndexSnapshot` (the state
    the last completed scan committed, its full-text search included), and whether a scan is
    running (``indexing``: results may miss changes that scan will commit).
    """

    snapshot: IndexSnapshot
    indexing: bool
    scanned: bool
    """True once a scan of the evidence folder has completed in this process."""


class IndexReader:
    """One workspace's index, scanned in the foreground or in a background thread.

    Readers call :meth:`view`, which never waits for a scan: while one runs, it returns the
    snapshot of the last completed scan (``indexing=True``); the SQL store answers it from
    rows later writes never change, over a read connection per thread (WAL). Scans never
    overlap.
    """

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._scan_mutex = threading.Lock()
        self._snapshot: IndexSnapshot = workspace.store.snapshot()
        self._scanned = False
        self._last_scan = 0.0
        self.last_scan: ScanResult | None = None
        self.scan_error: BaseException | None = None

    def view(self) -> IndexView:
        """The index as of the last completed scan, and whether a scan is running."""
        return IndexView(self._snapshot, indexing=self.indexing, scanned=self._scanned)

    @property
    def indexing(self) -> bool:
        """True while a scan runs."""
        return self._scan_mutex.locked()

    def scan(self, progress: ProgressCallback | None = None, lock_wait: float | None = None) -> ScanResult:
        """Scan now (waits for a scan already running), then publish the new state. ``lock_wait``
        caps the wait in seconds for another process's write lock (default the store's), then
        :class:`~grounding_core.store.IndexBusy` and the state published stays the last one.
        """
        with self._scan_mutex:
            return self._scan_locked(progress, lock_wait)

    def _scan_locked(self, progress: ProgressCallback | None, lock_wait: float | None = None) -> ScanResult:
        try:
            result = self.workspace.scan(progress, lock_wait=lock_wait)
        except BaseException as exc:
            self.scan_error = exc
            raise
        self.workspace.store.build_fts()  # query contexts and cite search see every line
        self._snapshot = self.workspace.store.snapshot()
        self._scanned = True
        self._last_scan = time.monotonic()
        self.last_scan = result
        self.scan_error = None
        return result

    def refresh_if_idle(self, min_interval: float = 1.0) -> bool:
        """Rescan (incrementally) unless a scan is running or one finished within ``min_interval``
        seconds; returns True when it scanned. Never waits for another scan.
        """
        if time.monotonic() - self._last_scan < min_interval:
            return False
        if not self._scan_mutex.acquire(blocking=False):
            return False
        try:
            self._scan_locked(None)
        finally:
            self._scan_mutex.release()
        return True

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a running scan to end; True when none runs now."""
        if not self._scan_mutex.acquire(timeout=timeout):
            return False
        self._scan_mutex.release()
        return True

    def start_background_scan(self, progress: ProgressCallback | None = None) -> threading.Thread:
        """Start a scan in a daemon thread; :meth:`view` answers meanwhile from the last commit.

        The scan mutex is taken before this returns, so :attr:`indexing` is already True.
        A failing scan is kept in :attr:`scan_error` (and logged by the thread's excepthook).
        """
        self._scan_mutex.acquire()

        def run() -> None:
            try:
                self._scan_locked(progress)
            finally:
                self._scan_mutex.release()

        thread = threading.Thread(target=run, name="grounding-scan", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self.workspace.store.close()


# -- the verifier --------------------------------------------------------------------------------


class Verifier:
    """Checks answers against one workspace's index; open once, check many (SPEC §14).

    ``root`` is the workspace root (the folder with ``grounding.toml``); ``evidence``
    overrides its evidence folder; ``today`` pins the date for activity checks (a
    :class:`datetime.date` or ``"YYYY-MM-DD"``). ``scan=True`` brings the index up to date
    now (incremental: only changed files are read); ``scan=False`` uses the index as stored.

    Raises :class:`grounding_core.config.ConfigError` for a bad ``grounding.toml`` (on scan
    also :class:`grounding_core.store.NoEvidenceMatched`, one: ``evidence_globs`` match none
    of the folder's files while indexed ones are still there) and ``FileNotFoundError`` when
    the evidence folder does not exist (on scan).
    """

    def __init__(self, root: str | Path, *, evidence: str | Path | None = None, today: TodayInput = None,
                 scan: bool = True) -> None:
        overrides: dict[str, Any] = {}
        if evidence is not None:
            path = Path(evidence)
            overrides["evidence"] = str(path.resolve() if path.is_absolute() else path)
        self._init(Workspace.open(Path(root).resolve(), **overrides), today, scan)

    @classmethod
    def from_workspace(cls, workspace: Workspace, *, today: TodayInput = None, scan: bool = True) -> Verifier:
        """A verifier over an already opened workspace (the CLI's)."""
        self = cls.__new__(cls)
        self._init(workspace, today, scan)
        return self

    def _init(self, workspace: Workspace, today: TodayInput, scan: bool) -> None:
        self.workspace = workspace
        self.config = workspace.config
        self._today = _date(today)
        self.reader = IndexReader(workspace)
        if scan:
            self.reader.scan()

    # -- lifecycle ------------------------------------------------------------------------------

    def refresh(self) -> ScanResult:
        """Rescan the evidence folder (incremental) so later checks see its changes."""
        return self.reader.scan()

    def close(self) -> None:
        """Close the index."""
        self.reader.close()

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def today(self, today: TodayInput = None) -> dt.date:
        """The date checks use: ``today`` if given, else the verifier's, the config's, the local date."""
        return _date(today) or self._today or self.config.today_or()

    @property
    def state(self) -> IndexSnapshot:
        """The index snapshot checks read now."""
        return self.reader.view().snapshot

    # -- checking ----------------------------------------------------------------------------

    def verify(self, answer: AnswerInput, *, context: Iterable[UnitInput] | None = None,
               today: TodayInput = None, path: str = "answer.json") -> Report:
        """Check a JSON answer (SPEC §5.2) against the index and, when given, the units shown.

        ``answer`` is a dict, JSON text (the model's raw output) or a pydantic model; a
        string that is not JSON, or any key of the wrong type, is a ``malformed-citation``
        diagnostic in the report, never an exception. ``context`` lists the units the model
        was shown (SPEC §6); ``None`` keeps the answer's own ``context`` (and without one,
        visibility is not checked: ``context-undeclared``). ``path`` names the answer in the
        report. Returns the §9 draft object; ``report.ok`` is False when any diagnostic is an
        error. Raises ValueError only for a bad ``today``.
        """
        return self.check(_answer_text(answer), kind="json", context=context, today=today, path=path)

    def check(self, text: str, *, kind: str | None = None, context: Iterable[UnitInput] | None = None,
              today: TodayInput = None, path: str | None = None) -> Report:
        """Check a Markdown draft or a JSON answer given as text.

        ``kind`` is ``"json"`` or ``"markdown"``; None decides by ``path`` (``.json``) or, without
        a path, by whether the text starts with ``{``. Otherwise as :meth:`verify`.
        """
        _require("text", text, str, "the draft or JSON answer as a str (decode bytes first)")
        if kind not in (None, "json", "markdown"):
            raise ValueError(f"kind must be 'json', 'markdown' or None, got {kind!r}")
        if path is not None:
            _require("path", path, str, "a str")
        kind = kind or _kind_of(text, path)
        path = path or ("answer.json" if kind == "json" else "answer.md")
        report = self.check_report(text, kind=kind, context=context, today=today, path=path)
        fps = fingerprints_of(path, report.findings, text)
        out = draft_json(report, fps)
        if kind == "json":
            pointers = _json_pointers(text)
            for diagnostic, finding in zip(out["diagnostics"], report.findings, strict=True):
                # no value of its own (the answer as a whole, or text that is not JSON): the document
                diagnostic["pointer"] = pointers.get(finding.span, "")
        return Report.model_validate(out)

    def check_report(self, text: str, *, kind: str, context: Iterable[UnitInput] | None = None,
                     today: TodayInput = None, path: str = "answer.json",
                     view: IndexView | None = None) -> DraftReport:
        """:meth:`check` returning the core's :class:`DraftReport` (spans 0-based, code points)."""
        view = view or self.reader.view()
        day = self.today(today)
        draft = parse_draft(text, kind)
        if context is not None:
            draft.context = context_spec(context, draft.context)
        return check_draft(draft, view.snapshot, self.config, day, path, self.workspace.read_text)

    def verify_chunks(self, payload: dict[str, Any] | BaseModel, chunks: dict[str, UnitInput], *,
                      fields: Iterable[str] | None = None, question: str | None = None,
                      today: TodayInput = None, path: str = "answer.json") -> tuple[Report, dict[str, Any]]:
        """Check a chunk-cited answer ``{"answer", "citations": [{"chunk_id", "quote"}]}``.

        ``chunks`` maps every chunk id the model was shown to its SPEC §6 unit; the mapping to
        claims is :mod:`grounding.adapters`' (documented there). Returns the report and the
        §5.2 answer it checked (with the computed ``status`` and ``missing_fields``). Raises
        :class:`grounding.adapters.ChunkError` for a citation of a chunk that was not shown.
        """
        from .adapters import ChunkAnswer, answer_from_chunks, chunk_units

        _require("payload", payload, (dict, BaseModel), "a dict or a pydantic model of the chunk-cited answer")
        _require("chunks", chunks, dict, "a dict of chunk id -> unit")
        view = self.reader.view()
        field_list = list(fields) if fields is not None else None
        units = chunk_units(chunks)
        shaped = payload if isinstance(payload, (dict, ChunkAnswer)) else payload.model_dump()
        wire = answer_from_chunks(shaped, chunks, view.snapshot, self.config, fields=field_list, question=question)
        first = self.check_report(json.dumps(wire, ensure_ascii=False, indent=1), kind="json", context=units,
                                  today=today, path=path, view=view)
        wire["status"], wire["missing_fields"] = first.status.value, list(first.missing_fields)
        return self.verify(wire, context=units, today=today, path=path), wire

    # -- evidence ----------------------------------------------------------------------------

    def compile(self, question: str, *, query: str | None = None, limit: int = DEFAULT_LIMIT,
                reserve: int = DEFAULT_RESERVE, today: TodayInput = None,
                view: IndexView | None = None) -> CompiledContext:
        """Compile a context for ``question`` (SPEC §8): the best-ranked whole units of active
        documents that fit in ``limit`` tokens, leaving ``reserve`` for the answer.

        ``query`` is the search text (default: the question). The kept units
        (``compiled.kept``) are the hits to show the model and to pass back as ``context``.
        """
        _require("question", question, str, "a str")
        if query is not None:
            _require("query", query, str, "a str or None")
        _require("limit", limit, int, "an int (tokens)")
        _require("reserve", reserve, int, "an int (tokens)")
        view = view or self.reader.view()
        spec = ContextSpec("query", query=query or question, limit=limit, reserve=reserve)
        return compile_context(view.snapshot, self.config, spec, question, self.today(today))

    def cite(self, target: str | None = None, *, grep: str | None = None, limit: int = 20,
             today: TodayInput = None, view: IndexView | None = None,
             cwd: Path | None = None) -> core_cite.CiteResult:
        """Verified citations of active evidence lines (``grounding cite``, SPEC §9).

        ``target`` is ``PATH:LINE`` (an evidence file, relative to ``cwd``, the workspace root
        or the evidence folder), ``DOC_ID[@VERSION][:LINE]``, an image region
        ``DOC_ID[@VERSION]#rN`` (its measured attributes), or ``DOC_ID`` with ``grep``; with
        no target, ``grep`` searches every active document. Raises
        :class:`grounding_core.cite.CiteError` (with ``name`` and ``hint``) when nothing can be
        cited, and ValueError for a target that is none of these forms.
        """
        if target is not None:
            _require("target", target, str, "a str (PATH:LINE or DOC_ID[@VERSION][:LINE]) or None")
        if grep is not None:
            _require("grep", grep, str, "a str or None")
        _require("limit", limit, int, "an int")
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        view = view or self.reader.view()
        day = self.today(today)
        if target is None or not target.strip():
            if grep is None:
                raise ValueError("give a target (PATH:LINE or DOC_ID[@VERSION][:LINE]) or search text")
            return core_cite.search_citations(view.snapshot, grep, day, limit)
        located = self.evidence_path(target, cwd)
        if located is not None:
            rel, line = located
            if line is None:
                raise ValueError(f"{target}: give a line, e.g. {target}:14")
            shown = self.config.evidence_display(rel)
            citation = core_cite.cite_path(view.snapshot, rel, line, day, shown_path=shown)
            if grep is not None and not core_cite.matches(citation.quote, grep):
                raise core_cite.CiteError("no-match", f"{shown}:{line} does not contain '{grep}'")
            return core_cite.CiteResult((citation,))
        if core_cite.is_region_target(view.snapshot, target):  # DOC_ID@VERSION#rN (SPEC §12)
            return core_cite.cite_region(view.snapshot, target, day, grep)
        parsed = core_cite.parse_target(target)
        if parsed is None:
            raise ValueError(f"{target!r} is neither an evidence file with a line (PATH:LINE) nor"
                             " DOC_ID[@VERSION][:LINE]")
        if parsed.line is not None:
            citation = core_cite.cite_line(view.snapshot, parsed.doc_id, parsed.line, day, parsed.version)
            if grep is not None and not core_cite.matches(citation.quote, grep):
                raise core_cite.CiteError("no-match", f"{citation.id} does not contain '{grep}'")
            return core_cite.CiteResult((citation,))
        return core_cite.cite_document(view.snapshot, parsed.doc_id, day, grep, parsed.version)

    def evidence_path(self, target: str, cwd: Path | None = None) -> tuple[str, int | None] | None:
        """``PATH[:LINE]`` naming an existing evidence file -> (path relative to the evidence root,
        line or None); None when ``target`` names no file under the evidence folder.

        Only the file's name is resolved (it is not read); a path outside the evidence folder
        is None, so it is never read.
        """
        _require("target", target, str, "a str (PATH[:LINE])")
        if "\0" in target:  # no file name holds a NUL (os would raise "embedded null byte")
            return None
        path_text, line = target, None
        head, sep, tail = target.rpartition(":")
        if sep and tail.isdigit() and head:
            path_text, line = head, int(tail)
        roots = [cwd or Path.cwd(), self.config.root, self.config.evidence_root]
        for base in roots:
            candidate = (base / path_text).resolve() if not Path(path_text).is_absolute() else Path(path_text).resolve()
            if candidate.is_file() and candidate.is_relative_to(self.config.evidence_root):
                return candidate.relative_to(self.config.evidence_root).as_posix(), line
        return None


def verify(answer: AnswerInput, *, root: str | Path, context: Iterable[UnitInput] | None = None,
           today: TodayInput = None) -> Report:
    """Check one answer against the workspace at ``root`` (SPEC §14); see :meth:`Verifier.verify`.

    Opens the workspace, brings its index up to date, checks, and closes it. To check many
    answers, open a :class:`Verifier` once instead.
    """
    with Verifier(root, today=today) as verifier:
        return verifier.verify(answer, context=context)


# -- helpers -------------------------------------------------------------------------------------


def _answer_text(answer: AnswerInput) -> str:
    if isinstance(answer, bytes):
        return answer.decode("utf-8", errors="replace")
    if isinstance(answer, str):
        return answer
    if isinstance(answer, BaseModel):
        data = answer.model_dump(mode="json", exclude_none=True)
    else:
        data = answer
    try:
        return json.dumps(data, ensure_ascii=False, indent=1)
    except (TypeError, ValueError) as exc:
        # not JSON-serialisable (a set, a date, ...): check its repr, which fails as malformed
        return f"<not JSON: {exc}>"


def _kind_of(text: str, path: str | None) -> str:
    if path is not None:
        return "json" if path.endswith(".json") else "markdown"
    return "json" if text.lstrip("\ufeff \t\r\n").startswith("{") else "markdown"


def context_spec(units: Iterable[UnitInput], declared: ContextSpec | None = None) -> ContextSpec:
    """The pipeline's context as a SPEC §6 context (``limit``/``reserve`` kept from ``declared``).

    Log units are validated by the core's context-log reader; a bad unit gives a spec with
    ``error`` set, which the check reports as ``invalid-context`` (X is empty).
    """
    limit = declared.limit if declared is not None and declared.error is None else None
    reserve = declared.reserve if declared is not None and declared.error is None else None
    parsed: list[ContextUnitSpec] = []
    logged: list[Any] = []
    memory_units: list[MemoryUnitSpec] = []  # memory hook (SPEC §11): "memory:S[/K[@N]]" units
    try:
        items = list(units)
    except TypeError:
        return ContextSpec("units", error="the context must be a list of units", limit=limit, reserve=reserve)
    for item in items:
        if isinstance(item, CoreContextUnit):
            logged.append({"doc_id": item.doc_id, "version": item.version, "lines": [item.start_line, item.end_line]})
        elif isinstance(item, BaseModel):
            logged.append(item.model_dump(mode="json"))
        elif isinstance(item, str) and is_memory_id(item):
            memory_unit = parse_memory_unit(item)
            if memory_unit is None:
                return ContextSpec("units", error=f"context unit {item!r} is not memory:SCOPE, memory:SCOPE/KEY"
                                   " or memory:SCOPE/KEY@VERSION", limit=limit, reserve=reserve)
            memory_units.append(memory_unit)
        elif isinstance(item, str):
            m = UNIT_RE.fullmatch(item)
            if m is None:
                return ContextSpec("units", error=f"context unit {item!r} is not DOC_ID@VERSION or"
                                   " DOC_ID@VERSION:START-END", limit=limit, reserve=reserve)
            start = int(m["start"]) if m["start"] else None
            end = int(m["end"]) if m["end"] else start
            if start is not None and end is not None and end < start:
                return ContextSpec("units", error=f"context unit {item!r}: the range ends before it starts",
                                   limit=limit, reserve=reserve)
            parsed.append(ContextUnitSpec(m["doc_id"], int(m["version"]), start, end))
        else:
            logged.append(item)
    if logged:
        try:
            log = json.dumps({"units": logged}, ensure_ascii=False)
            parsed.extend(parse_context_log(log))
            memory_units.extend(memory_log_units(log))  # {"memory": "memory:S/K@N"} items
        except (ValueError, TypeError) as exc:
            return ContextSpec("units", error=f"pipeline context: {exc}", limit=limit, reserve=reserve)
    return ContextSpec("units", units=tuple(parsed), limit=limit, reserve=reserve,
                       memory_units=tuple(memory_units))


def _json_pointers(text: str) -> dict[Span, str]:
    """Span (as the core computes it) -> JSON Pointer, for the values and keys of a JSON text."""
    import json_source_map

    try:
        entries = json_source_map.calculate(text)
    except Exception:  # the library raises its own error types; the core reported the problem
        return {}
    index = LineIndex(text)
    out: dict[Span, str] = {}

    def span(start: Any, end: Any) -> Span:
        a, b = index.position(start.position), index.position(end.position)
        return Span(a[0], a[1], b[0], b[1])

    for pointer, entry in entries.items():
        out.setdefault(span(entry.value_start, entry.value_end), pointer)
        if entry.key_start is not None and entry.key_end is not None:
            out.setdefault(span(entry.key_start, entry.key_end), pointer)
    return out


def citation_model(config: Any, c: core_cite.Citation) -> Citation:
    """A core citation as the :class:`grounding.models.Citation` model (path relative to the root)."""
    claim = c.claim()
    return Citation(footnote=c.footnote(), id=c.id, doc_id=c.doc_id, version=c.version, line=c.line,
                    sha256=c.sha256, quote=c.quote, text=c.text, field=c.field, value=c.value,
                    path=config.evidence_display(c.path),
                    region=c.region,
                    claim=(None if claim is None else ImageClaim.model_validate(claim) if c.region is not None
                           else Claim.model_validate(claim)))


def units_of(compiled: CompiledContext) -> list[dict[str, Any]]:
    """The kept units of a compiled context as SPEC §6 log units (``lines`` form)."""
    return [{"doc_id": u.doc_id, "version": u.version, "lines": [u.start_line, u.end_line]} for u in compiled.kept]


__all__ = ["IndexReader", "IndexView", "Verifier", "citation_model", "context_spec", "units_of", "verify"]
