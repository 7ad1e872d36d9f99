"""Checking a parsed draft against an index snapshot (SPEC §6, §7).

A check is ``check_draft(draft, snapshot, config, today, context=...)``: the draft, one frozen
:class:`~grounding_core.index.IndexSnapshot`, the resolved context X (:func:`resolve_context`:
units, a context log read through the caller's ``read_text``, or a ``query`` compiled against
the *same* snapshot, so ``--at N`` is exact) and the policy (``config``: strict mode, meta
fields, separators, the token encoding). It is pure: same inputs, same report; it never
reads files and never calls back into the store. Every index read is an indexed lookup whose
cost follows the draft (its citations and checked keys), never the corpus.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from . import image_claims
from . import memory as memory_claims
from .config import Config
from .conflicts import Conflict, GateResult, check_keys, source_id
from .drafts import ContextSpec, ContextUnitSpec, ParsedDraft, parse_context_log
from .edits import with_context_edits
from .evidence import EvidenceDocument, parse_field_line, split_marker
from .images import is_image_path
from .index import ConflictKey, IndexSnapshot, VersionRecord
from .model import (
    FIRST_LINE,
    Claim,
    ConflictDetail,
    DeferredLocations,
    DraftReport,
    Edit,
    FieldLine,
    Finding,
    Location,
    Span,
    Status,
)
from .text import (
    VALUE_TRAILING_PUNCTUATION,
    describe_difference,
    has_letter_or_digit,
    normalize,
    normalize_value,
    shorten,
    split_lines,
)

ReadText = Callable[[str], str | None]
"""Reads a file relative to the workspace root; None when it does not exist."""

CompileQuery = Callable[[ContextSpec, ParsedDraft], "Visibility"]
"""Compiles a ``{query, limit, reserve}`` context into the visible set (SPEC §8); a caller
that passes one takes over the compilation (it must use the check's snapshot)."""


@dataclass
class Visibility:
    """The context X as a membership test over (doc_id, version, 1-based line, line text)."""

    whole: set[tuple[str, int]] = field(default_factory=set)
    ranges: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)
    texts: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    input_tokens: int | None = None
    memory: list[memory_claims.MemoryUnitSpec] = field(default_factory=list)
    """Memory units of X (SPEC §11): a scope, a key's active version, or one version."""
    complete: bool = True
    """False when a compiled context ranked an index whose full-text rows were still being
    built ("still indexing": a later check may see more)."""
    left_out: dict[tuple[str, int], list[tuple[int, int, int]]] = field(default_factory=dict)
    """A compiled query context's ranked units that did not fit its budget (SPEC §8): per
    (doc_id, version) the 1-based (start, end) lines and the unit's tokens; memory units under
    (``memory:SCOPE/KEY``, version) with lines (1, 1). Used only to say why a line was not
    visible."""
    budget: tuple[int, int, int] | None = None
    """A compiled query context's (limit, reserve, input tokens used), or None."""

    def add(self, unit: ContextUnitSpec) -> None:
        key = (unit.doc_id, unit.version)
        if unit.text is not None:
            self.texts.setdefault(key, set()).update(split_lines(unit.text))
        elif unit.start is None:
            self.whole.add(key)
        else:
            self.ranges.setdefault(key, []).append((unit.start, unit.end or unit.start))

    def visible(self, doc_id: str, version: int, line: int, line_text: str) -> bool:
        """SPEC §6: the whole line, at the cited version, lies in X."""
        key = (doc_id, version)
        if key in self.whole:
            return True
        if any(a <= line <= b for a, b in self.ranges.get(key, ())):
            return True
        return line_text in self.texts.get(key, ())

    def why_left_out(self, doc_id: str, version: int, line: int) -> str | None:
        """Why a line of a compiled query context's ranked unit is not visible (SPEC §8: the
        unit did not fit the budget), as a clause for a message; None when no skipped unit
        holds it (it did not rank for the query, or the context is not a compiled query).
        """
        if self.budget is None:
            return None
        for start, end, cost in self.left_out.get((doc_id, version), ()):
            if start <= line <= end:
                limit, reserve, used = self.budget
                return (f"the query ranked it, but its unit ({cost} tokens) did not fit the budget: the"
                        f" input may use limit − reserve = {limit - reserve} tokens and {used} were used")
        return None

    def did_not_fit(self, cid: str, supported_by: str, doc_id: str, version: int,
                    line: int) -> tuple[str, str] | None:
        """The message and hint of an ``invisible-source`` finding (SPEC §6, §8) when a compiled
        query context ranked the cited line's unit but left it out for its budget
        (:meth:`why_left_out`), else None: one wording for evidence lines and memory entries
        (``supported_by``: "the evidence" or "memory"; a memory entry's unit is
        ``memory:SCOPE/KEY``, line 1).
        """
        why = self.why_left_out(doc_id, version, line)
        if why is None:
            return None
        return (f"{cid} is supported by {supported_by} but was not in the compiled context: {why}",
                "Raise the query context's limit (or lower its reserve) so the unit fits, or cite a"
                " source that was visible.")


@dataclass
class _ClaimResult:
    claim: Claim
    record: VersionRecord | None = None
    line_text: str | None = None
    field: str | None = None
    value: str | None = None
    subject: str | None = None
    supported: bool = False
    meta: bool = False
    valid: bool = False
    line: int | None = None
    """The cited line's 1-based number (an image attribute's: ``images.attribute_line_number``)."""
    image: image_claims.RegionResult | None = None
    """Set for an image claim (SPEC §12)."""
    memory: memory_claims.MemoryEntry | None = None
    """The cited memory entry of a memory claim (SPEC §11); ``line_text`` stays None, so the
    conflict gate and coverage, which read cited lines, never see it."""

    @property
    def identity(self) -> tuple[str, int, int] | None:
        """(doc_id, version, line) of the cited line (SPEC §7.5 identities; for an image the
        attribute's line, SPEC §15), or None when the claim names none.
        """
        ref = self.claim.citation
        if ref is not None:
            return (ref.doc_id, ref.version, ref.line)
        region = self.claim.region
        return (region.doc_id, region.version, self.line) if region is not None and self.line is not None else None

    @property
    def cited_id(self) -> str | None:
        ref = self.claim.citation or self.claim.region or self.claim.memory
        return ref.id if ref is not None else None


@dataclass
class ResolvedContext:
    """The context X of one draft (SPEC §6) and the findings resolving it produced
    (``context-undeclared``, ``invalid-context``). ``visibility`` None: no context declared,
    visibility is not checked.
    """

    visibility: Visibility | None
    findings: list[Finding] = field(default_factory=list)


def resolve_context(
    draft: ParsedDraft,
    snapshot: IndexSnapshot,
    config: Config,
    today: dt.date,
    read_text: ReadText | None = None,
    compile_query: CompileQuery | None = None,
) -> ResolvedContext:
    """SPEC §6: a draft's declared context -> X. A context log is read with ``read_text``
    (relative to the workspace root); a ``query`` context is compiled against ``snapshot``
    (SPEC §8), the snapshot the check reads, unless ``compile_query`` is given.
    """
    findings: list[Finding] = []
    if compile_query is None:
        def compile_query(spec: ContextSpec, parsed: ParsedDraft) -> Visibility:
            from .context import compile_context

            return compile_context(snapshot, config, spec, parsed.question or "", today).visibility()
    visibility = _resolve_context(draft, findings, read_text, compile_query)
    return ResolvedContext(visibility, findings)


def check_draft(
    draft: ParsedDraft,
    snapshot: IndexSnapshot,
    config: Config,
    today: dt.date,
    path: str = "",
    read_text: ReadText | None = None,
    compile_query: CompileQuery | None = None,
    *,
    context: ResolvedContext | None = None,
    count_output: bool = False,
) -> DraftReport:
    """Run every SPEC §7 check on one draft; returns findings, status and coverage (§7.5).

    ``snapshot`` is the index the check reads (``replay(n)``; only it). ``context`` is the
    resolved X (:func:`resolve_context`); without it the context is resolved here with
    ``read_text``/``compile_query``. ``path`` is the draft path relative to the workspace
    root (used in the report only). Output tokens (SPEC §8) are counted when the draft
    declares a budget (``limit``/``reserve`` or a ``query`` context) or ``count_output`` is
    set: loading the tokenizer costs about a second per process. Never raises for bad
    drafts: problems are findings.
    """
    with snapshot.reading():
        if context is None:
            context = resolve_context(draft, snapshot, config, today, read_text, compile_query)
        return _check(draft, snapshot, config, today, path, context, count_output)


def _check(draft: ParsedDraft, snapshot: IndexSnapshot, config: Config, today: dt.date, path: str,
           context: ResolvedContext, count_output: bool) -> DraftReport:
    findings: list[Finding] = [*draft.findings, *context.findings]
    visibility = context.visibility
    results = [_check_memory(c, snapshot, visibility, findings) if c.memory is not None  # memory hook (SPEC §11)
               else _check_image(c, snapshot, config, today, visibility, findings) if c.region is not None
               else _check_claim(c, snapshot, config, today, visibility, findings) for c in draft.claims]
    for r in results:
        if r.supported and r.field is not None and not r.meta and r.value is not None:
            _claim_value(r, findings)
    required = _unique([name for name, _ in draft.fields])
    keys = _checked_keys(draft, results, required, snapshot, today)
    gate = _gate(draft, results, keys, snapshot, today, findings, config)
    _uncited(draft, snapshot, config, today, findings)

    valid = [r for r in results if r.valid]
    covered = _unique([r.field for r in valid if r.field is not None])
    missing = [f for f in required if f not in covered]
    for name, span in draft.fields:
        if name in missing and not any(c.field == name for c in gate.conflicts):
            findings.append(_missing_field(name, span, results, snapshot, today, findings, draft.kind == "json"))
    status = _status(gate, valid, missing)
    coverage = _coverage(results, keys.required, gate)
    tokens, reserve = _output_budget(draft, valid, status, missing, visibility, config, findings,
                                     count_output)
    if draft.declared_status is not None and draft.declared_status != status.value:
        findings.append(Finding(
            "status-mismatch", draft.declared_status_span,
            f"declared status '{draft.declared_status}' but the checks give '{status.value}'",
            hint=f"Set status to \"{status.value}\".",
        ))
    if draft.declared_missing is not None and set(draft.declared_missing) != set(missing):
        findings.append(Finding(
            "status-mismatch", draft.declared_status_span,
            f"declared missing_fields {sorted(set(draft.declared_missing))} but the checks give"
            f" {sorted(missing)}",
            hint="Set missing_fields to the required fields no valid claim covers.",
        ))
    return DraftReport(
        path=path, status=status, required_fields=required, covered_fields=covered,
        missing_fields=missing, field_completeness=not missing, coverage=coverage,
        same_key_sources_checked=gate.lines_checked,
        findings=with_context_edits(draft, _sorted_unique(findings)), valid_claims=[r.claim for r in valid],
        claims=list(draft.claims), output_tokens=tokens, output_reserve=reserve,
        wire_claims=[_wire_claim(r) for r in valid],
        index_complete=visibility.complete if visibility is not None else True,
    )


def _missing_field(name: str, span: Span, results: list[_ClaimResult], snapshot: IndexSnapshot,
                   today: dt.date, findings: list[Finding], json_answer: bool = False) -> Finding:
    """GR109, saying why: an invalid citation of the field, an unknown field name, or none.

    An invalid citation is named by the line (1-based) of the first finding reported on it, the
    same place that finding is shown, and in a JSON answer also by its JSON Pointer (``/claims/N``,
    0-based as RFC 6901 counts).
    """
    invalid = [r for r in results if not r.valid and (r.field or r.claim.json_field) == name]
    if invalid:
        claim = invalid[0].claim
        line = _reported_line(claim, findings)
        where = f"line {line}"
        if json_answer:
            where += f" (/claims/{next(i for i, r in enumerate(results) if r.claim is claim)})"
        what = "claim" if json_answer else "citation"
        return Finding(
            "missing-field", span,
            f"required field '{name}' is covered by no valid claim: the {what} on {where} states it but is"
            " not valid",
            hint=f"Fix the error reported on {where}; this warning goes with it.")
    if not snapshot.has_field(name, today):
        close = snapshot.similar_field_names(name, today, n=1)
        return Finding(
            "missing-field", span,
            f"required field '{name}' is covered by no valid claim, and no active evidence line has"
            " that field",
            hint=(f"Did you mean '{close[0]}'?" if close else
                  "Check the field name against the evidence, or keep it to make the answer abstain on it."))
    if json_answer:
        hint = (f"Add a claim whose field is '{name}', citing an active evidence line (`grounding cite"
                f" --grep {name} --format json` prints one), or remove it from fields if the answer should"
                " abstain on it.")
    else:
        hint = (f"Add a sentence stating '{name}' with a citation to an active evidence line, or remove"
                " it from fields if the answer should abstain on it.")
    return Finding("missing-field", span, f"required field '{name}' is covered by no valid claim", hint=hint)


def _reported_line(claim: Claim, findings: list[Finding]) -> int:
    """The 1-based line where the first finding about ``claim``'s citation is reported (the
    citation's own line when there is none).
    """
    ref = claim.citation
    first = claim.citation_span.start_line
    last = max(claim.citation_span.end_line, claim.sentence_span.end_line)
    start = min(first, claim.sentence_span.start_line)
    lines = sorted(f.span.start_line for f in findings
                   if ref is not None and f.citation == ref.id and start <= f.span.start_line <= last)
    return (lines[0] if lines else first) + 1


# -- output budget (§8) -------------------------------------------------------------------


def _wire_claim(r: _ClaimResult) -> dict[str, object]:
    """A valid claim in the eight-key shape of SPEC §5, keys in order (an image claim: the nine
    of SPEC §15; a memory claim: the seven of §11).
    """
    if r.memory is not None:
        return memory_claims.wire_claim(r.memory)
    if r.image is not None and r.claim.region is not None:
        return image_claims.wire_claim(r.image, r.claim.region)
    assert r.claim.citation is not None and r.record is not None and r.line_text is not None
    ref = r.claim.citation
    return {
        "text": split_marker(r.line_text), "quote": r.line_text, "id": ref.id,
        "doc_id": ref.doc_id, "version": ref.version, "line": ref.line,
        "sha256": r.record.sha256, "field": r.field or "",
    }


def _output_budget(draft: ParsedDraft, valid: list[_ClaimResult], status: Status,
                   missing: list[str], visibility: Visibility | None, config: Config,
                   findings: list[Finding], count_output: bool) -> tuple[int | None, int | None]:
    """Output tokens of the draft's answer wire (SPEC §8) and GR113 against the reserve.

    Counted only when the draft declares a budget or ``count_output`` is set (None otherwise).
    """
    spec = draft.context
    reserve = spec.reserve if spec is not None and spec.error is None else None
    limit = spec.limit if spec is not None and spec.error is None else None
    if spec is not None and spec.kind == "query" and spec.error is None:
        from .context import DEFAULT_LIMIT, DEFAULT_RESERVE

        reserve = reserve or DEFAULT_RESERVE
        limit = limit or DEFAULT_LIMIT
    if reserve is None and limit is None and not count_output:
        return None, None
    from .budget import output_tokens, render_answer_wire  # tiktoken: imported only when counting

    wire = render_answer_wire(status.value, [_wire_claim(r) for r in valid], missing)
    tokens = output_tokens(wire, config.encoding)
    if reserve is not None and tokens > reserve:
        findings.append(Finding(
            "output-over-budget", FIRST_LINE,
            f"the answer needs {tokens} output tokens but the reserve is {reserve}: what is counted is the"
            f" JSON answer this draft compiles to (SPEC §8: status, its {len(valid)} valid claim(s) with"
            f" their quotes, ids and hashes, and missing_fields, {config.encoding}, +BOS/EOS), not the"
            " Markdown prose",
            hint="Cite fewer lines or raise context.reserve (`grounding check --format json` shows"
                 " output_tokens).",
        ))
    elif (limit is not None and visibility is not None and visibility.input_tokens is not None
          and visibility.input_tokens + tokens > limit):
        findings.append(Finding(
            "output-over-budget", FIRST_LINE,
            f"input {visibility.input_tokens} + output {tokens} tokens exceed the limit {limit} (input: the"
            " prompt rendered from the context; output: the JSON answer this draft compiles to, SPEC §8)",
            hint="Raise context.limit or shorten the answer.",
        ))
    return tokens, reserve


# -- context -------------------------------------------------------------------------------


def _resolve_context(
    draft: ParsedDraft,
    findings: list[Finding],
    read_text: ReadText | None,
    compile_query: CompileQuery | None,
) -> Visibility | None:
    spec = draft.context
    if spec is None:
        findings.append(Finding(
            "context-undeclared", FIRST_LINE,
            "no context declared, so visibility was not checked",
            hint="Declare the context the answer was written from in front matter, e.g."
            ' context: {units: ["DOC_ID@VERSION"]} (or a log file, or a query with limit and reserve).',
        ))
        return None

    def invalid(message: str) -> Visibility:
        findings.append(Finding("invalid-context", FIRST_LINE,
                                f"{message}; nothing counts as visible",
                                hint="Fix the context declaration (SPEC §6 forms: units, log, query)."))
        return Visibility()

    if spec.error is not None:
        return invalid(spec.error)
    if spec.kind == "units":
        vis = Visibility(memory=list(spec.memory_units))
        for unit in spec.units:
            vis.add(unit)
        return vis
    if spec.kind == "log":
        assert spec.log is not None
        text = read_text(spec.log) if read_text is not None else None
        if text is None:
            return invalid(f"the context log {shorten(spec.log, quote=True)} cannot be read: it must be"
                           " a UTF-8 file inside the workspace root (paths are relative to the root)")
        try:
            units = parse_context_log(text)
            memory_units = memory_claims.log_units(text)
        except ValueError as exc:
            return invalid(f"context log {spec.log!r}: {exc}")
        vis = Visibility(memory=[*spec.memory_units, *memory_units])
        for unit in units:
            vis.add(unit)
        return vis
    if "\x00" in (spec.query or ""):
        return invalid("the context query holds a NUL character (U+0000), which no evidence line holds")
    if compile_query is None:
        return invalid("a query context needs the context compiler, which this caller did not provide")
    return compile_query(spec, draft)


# -- source support (§7.1) -----------------------------------------------------------------


def _check_image(claim: Claim, state: IndexSnapshot, config: Config, today: dt.date,
                 visibility: Visibility | None, findings: list[Finding]) -> _ClaimResult:
    """SPEC §12 P and V of an image claim (``grounding_core.image_claims``); its attribute is
    the claim's field and its conflict key ``(SUBJECT#rN, FIELD)``.
    """
    visible = visibility.visible if visibility is not None else None
    found = image_claims.check_region_claim(claim, state, config, today, visible, findings)
    return _ClaimResult(claim, record=found.record, line_text=found.line_text, field=found.field,
                        value=found.value, subject=found.subject, supported=found.supported,
                        valid=found.valid, line=found.line, image=found)


def _check_memory(claim: Claim, source: memory_claims.MemorySource, visibility: Visibility | None,
                  findings: list[Finding]) -> _ClaimResult:
    """SPEC §11 P and V of a memory claim; its key counts as the claim's field (§15)."""
    checked = memory_claims.check_memory_claim(
        claim, source, visibility.memory if visibility is not None else None, findings,
        left_out=visibility.did_not_fit if visibility is not None else None)
    entry = checked.entry
    return _ClaimResult(claim, field=entry.key if entry else None, value=entry.value if entry else None,
                        supported=checked.supported, valid=checked.valid, memory=entry)


def _check_claim(
    claim: Claim,
    state: IndexSnapshot,
    config: Config,
    today: dt.date,
    visibility: Visibility | None,
    findings: list[Finding],
) -> _ClaimResult:
    result = _ClaimResult(claim)
    ref = claim.citation
    if ref is None:
        return result
    cid = ref.id
    span = claim.citation_span

    def add(name: str, message: str, hint: str = "", fix: Edit | None = None,
            related: tuple[Location, ...] = (), at: Span | None = None) -> None:
        findings.append(Finding(name, at or span, message, hint=hint, citation=cid, fix=fix,
                                related=related))

    versions = state.versions(ref.doc_id)
    if not versions:
        spelled = _other_normal_form(state, ref.doc_id)
        if spelled is not None:  # NFC typed, NFD on disk (a macOS file name), or the reverse
            form = "decomposed (NFD, a letter then a combining accent, as macOS spells file names)" \
                if unicodedata.normalize("NFD", spelled) == spelled else "composed (NFC)"
            add("unknown-source", f"no evidence document has doc_id '{ref.doc_id}' as written: the evidence's"
                f" doc_id {ascii(spelled)} looks the same but is spelled with {form} characters",
                hint="Cite the doc_id exactly as the evidence spells it (`grounding cite` prints it), or give"
                     " the evidence file front matter with an explicit doc_id.",
                at=claim.value_span("doc_id") if claim.json_text is not None else None)
            return result
        close = state.similar_doc_ids(ref.doc_id, n=1)
        add("unknown-source", f"no evidence document has doc_id '{ref.doc_id}'",
            hint=f"Did you mean '{close[0]}'?" if close else "Check the doc_id against the evidence folder.",
            at=claim.value_span("doc_id") if claim.json_text is not None else None)
        return result
    newest = max(versions)
    if ref.version > newest:
        add("unknown-source", f"'{ref.doc_id}' has no version {ref.version}; the newest is {newest}",
            hint=f"Cite {ref.doc_id}@{newest}.",
            at=claim.value_span("version") if claim.json_text is not None else None)
        return result
    record = versions.get(ref.version)
    current = versions[newest]
    if is_image_path((record or current).path):  # image hook (SPEC §12): an image has regions
        add("unknown-source", f"{ref.doc_id}@{ref.version} is an image: cite a region as"
            f" {ref.doc_id}@{ref.version}#rN with one measured attribute, e.g. \"颜色：红色\"",
            hint="Completion after '#' lists the regions with their attributes.",
            at=claim.value_span("line") if claim.json_text is not None else None)
        return result
    supported = True
    if ref.version < newest:
        supported = False
        current_inactive = state.inactive_reason(current, today)
        fix = None if current_inactive else _reanchor(claim, state, current, record)
        if current_inactive:
            hint = (f"Version {newest} is not active either ({current_inactive}); cite another"
                    " active source.")
        elif fix:
            hint = f"Re-anchor to {fix.new_text.split(' ')[0]}, where the same line still exists."
        else:
            hint = ("The cited line no longer exists verbatim in the current version; re-read it and"
                    " cite the current line.")
        message = (f"{cid} cites version {ref.version}, but version {newest} of '{ref.doc_id}' is newer and"
                   f" not active either ({current_inactive}): no version of it supports an answer"
                   if current_inactive else
                   f"{cid} cites version {ref.version}, but version {newest} of '{ref.doc_id}' is current")
        stale_related = [Location(config.evidence_display(current.path), 1, f"current version {newest}")]
        moved = None if fix or current_inactive else _same_field_now(claim, state, current, record)
        if moved is not None:
            number, text = moved
            message += f"; its field is now line {number}: '{shorten(text)}'"
            hint = (f"Cite {ref.doc_id}@{newest}:{number} (the same field now), then check that the sentence"
                    " still says what that line says.")
            stale_related.insert(0, Location(config.evidence_display(current.path), number,
                                             f"{CURRENT_FIELD_LINE} {newest}", text))
        duplicate = duplicate_note(record, current, config.evidence_display)
        if duplicate and record is not None:
            message += f" ({duplicate})"
            hint = duplicate_hint(record, current, config.evidence_display) + "."
        elif record is not None and record.sha256 == current.sha256 and not current_inactive:
            message += "; " + identical_note(record, current, versions, config.evidence_display)
            if fix:
                hint = (f"Re-anchor to {fix.new_text.split(' ')[0]}: the content is byte-identical, so the"
                        " re-anchor is exact (`grounding check --fix` writes it).")
        add("stale-citation", message, hint=hint, fix=fix, related=tuple(stale_related))
        if record is None:
            return result  # older content never indexed: hash and quote are not checked
    assert record is not None
    if ref.version == newest:
        reason = state.inactive_reason(record, today)
        if reason is not None:
            supported = False
            revived = deleted_duplicate_hint(versions, config.evidence_display)
            renamed = _renamed_spelling(claim, state, record, today, config.evidence_display)
            if renamed is not None:
                note, hint, fix = renamed
                add("inactive-source", f"{ref.doc_id}@{ref.version} is not active: {reason}; {note}", hint=hint,
                    fix=fix)
            else:
                add("inactive-source", f"{ref.doc_id}@{ref.version} is not active: {reason}",
                    hint=(revived + ".") if revived else
                    "Cite an active source instead; revoked, deleted, expired and not-yet-effective"
                    " documents never support an answer.")
    result.record = record
    cited = _CitedVersion(state, record)
    line_text = state.line_text(record, ref.line, claim.quote) if 0 < ref.line <= cited.line_count else None
    if line_text is None:
        add("unknown-source", f"{ref.doc_id}@{ref.version} has {cited.line_count} lines; there is no line {ref.line}",
            hint="Check the line number.", at=claim.value_span("line") if claim.json_text is not None else None)
        return result
    result.line_text = line_text
    front_matter = cited.is_front_matter_line(ref.line)
    field_line = None if front_matter else parse_field_line(line_text, cited.separators)
    if field_line is not None:
        result.field, result.value = field_line.field, field_line.value
    result.subject = cited.subject
    related = (Location(config.evidence_display(record.path), ref.line, line_text),)
    hex_text = claim.hash_prefix or ""
    if not record.sha256.startswith(hex_text) or (claim.json_sha256 is not None and record.sha256 != hex_text):
        supported = False
        older = any(old.startswith(hex_text) for old in record.previous_shas)
        reanchor = _reanchor(claim, state, current, record)
        if not older:
            hint = f"Use sha256:{record.sha256[:12]}."
        elif reanchor is not None:
            hint = f"{reanchor.title}: the quoted line is still there, verbatim."
        else:  # the content changed under the same version number: the fact may have changed
            hint = (f"Line {ref.line} of {ref.doc_id}@{ref.version} now reads '{shorten(line_text)}': re-read it,"
                    f" restate the sentence if the fact changed, then cite the current line"
                    f" (grounding cite {ref.doc_id}@{ref.version}:{ref.line}).")
        add("hash-mismatch",
            f"sha256:{hex_text[:12]} is not the hash of {ref.doc_id}@{ref.version}"
            + (" (it is the hash of older content of this same version)" if older else "")
            + f"; the current hash starts {record.sha256[:12]}",
            hint=hint,
            fix=reanchor,
            at=claim.value_span("sha256") if claim.json_text is not None else None,
            related=related)
    quote = claim.quote or ""
    if quote != line_text:
        supported = False
        doc = cited.document()  # the quote's line is looked for in the whole version
        where = [i for i, text in enumerate(doc.lines, 1) if text == quote]
        detail = describe_difference(line_text, quote)
        if where:
            message = (f"the quote is line {where[0]} of {ref.doc_id}@{ref.version}, not line {ref.line}"
                       f" (line {ref.line} is '{shorten(line_text)}')")
            hint = f"Cite {ref.doc_id}@{ref.version}:{where[0]}, or quote line {ref.line} exactly."
        else:
            message = f"the quote is not line {ref.line} of {ref.doc_id}@{ref.version} verbatim"
            message += f": {detail}" if detail else ""
            hint = "Quote the whole cited line exactly, list marker included."
        if where:
            fix_quote = _move_to_line(claim, record, where, doc)
        else:
            fix_quote = _replace_quote(claim, line_text) if claim.json_text is None else None
        add("quote-mismatch", message, hint=hint, related=related, fix=fix_quote,
            at=claim.value_span("quote") if claim.json_text is not None else None)
    if claim.json_text is not None:
        expected_text = split_marker(quote)
        if claim.json_text != expected_text:
            supported = False
            difference = describe_difference(expected_text, claim.json_text, "text", "the quote without its marker")
            add("quote-mismatch", "text is not the quote without its list marker"
                + (f": {difference}" if difference else ""),
                hint=f"Set text to {expected_text!r}.", at=claim.value_span("text"))
        parsed = parse_field_line(quote, config.field_separators)
        expected_field = parsed.field if parsed else None
        if claim.json_field != expected_field:
            supported = False
            add("quote-mismatch",
                f"field {claim.json_field!r} is not the text before the first separator of the quote"
                + (f" ({expected_field!r})" if expected_field else " (the quote has no field separator)"),
                hint=f"Set field to {expected_field!r}." if expected_field else "Cite a field line.",
                at=claim.value_span("field"))
    meta = front_matter or (field_line is not None and state.is_meta_field(field_line.field))
    if meta:
        result.meta = True
        what = ("a front-matter line" if front_matter
                else f"the meta field '{field_line.field if field_line else ''}'")
        add("meta-field", f"{cid} is {what}, which never supports an answer",
            hint="Cite the line that states the fact itself.")
    result.supported = supported
    if not supported:
        return result
    if visibility is not None and not visibility.visible(ref.doc_id, ref.version, ref.line, line_text):
        left_out = visibility.did_not_fit(cid, "the evidence", ref.doc_id, ref.version, ref.line)
        if left_out is not None:
            add("invisible-source", left_out[0], hint=left_out[1])
        else:
            add("invisible-source",
                f"{cid} is supported by the evidence but was not in the declared context",
                hint="Add the unit to the context the answer was written from, or cite a line that"
                " was visible.")
        return result
    result.valid = not meta
    return result


class _CitedVersion:
    """What a claim check reads of its cited text version (SPEC §3): the line count, where the
    front matter ends, the subject and the separators come from the record when the index
    knows them (SQL store: ``line_count`` >= 0), so only the cited line is read
    (:meth:`IndexSnapshot.line_text`); the parsed document is read only when asked for (a
    quote that is not the cited line is looked for in the whole version).
    """

    __slots__ = ("_doc", "front_end", "line_count", "record", "separators", "state", "subject")

    def __init__(self, state: IndexSnapshot, record: VersionRecord) -> None:
        self.state, self.record = state, record
        self._doc: EvidenceDocument | None = None
        if record.line_count >= 0 and record.front_end >= 0:
            self.line_count, self.front_end = record.line_count, record.front_end
            self.subject, self.separators = record.subject, state.settings.separators
        else:
            doc = self.document()
            self.line_count, self.front_end = len(doc.lines), doc.front.end_line
            self.subject, self.separators = record_subject(doc, record), doc.separators

    def document(self) -> EvidenceDocument:
        if self._doc is None:
            self._doc = self.state.document(self.record)
        return self._doc

    def is_front_matter_line(self, line: int) -> bool:
        return 1 <= line <= self.front_end


def line_field(doc: EvidenceDocument, line: int) -> FieldLine | None:
    """The field of one 1-based body line (SPEC §3), without parsing every line of ``doc``:
    :func:`parse_field_line` with the document's separators (the same rule as
    ``doc.field_lines``); None for front matter and lines that are not field lines.
    """
    if doc.is_front_matter_line(line) or not 0 < line <= len(doc.lines):
        return None
    return parse_field_line(doc.lines[line - 1], doc.separators)


def record_subject(doc: EvidenceDocument, record: VersionRecord) -> str | None:
    """The version's subject (SPEC §3): from the record when the index knows it (SQL store),
    else from the document (which may read every field line to find it).
    """
    return record.subject if record.line_count >= 0 else doc.subject



def duplicate_note(cited: VersionRecord | None, current: VersionRecord,
                   display: Callable[[str], str] = str) -> str:
    """Why ``current`` superseded a declared version from another file (SPEC §3), or "".

    An undeclared version from another path than the declared one cited is what a stray file
    sharing the doc_id makes: the index numbers it as the next version (``duplicate-doc-id``).
    """
    if cited is None or current.declared or not cited.declared or cited.path == current.path:
        return ""
    return (f"{display(current.path)} declares no version but shares doc_id '{current.doc_id}' with"
            f" {display(cited.path)}, a duplicate-doc-id: the index numbered it version {current.version}"
            + (", and it is deleted" if current.revoked and current.reason == "deleted" else ""))


def duplicate_hint(cited: VersionRecord, current: VersionRecord, display: Callable[[str], str] = str) -> str:
    """What to do about :func:`duplicate_note` (a sentence without the final stop): the log
    keeps the stray version as the newest known one (SPEC §4), so only a higher declared
    version makes the declared file's content current again.
    """
    start = f"Declare `version: {current.version + 1}` in {display(cited.path)} to make its content current again"
    if current.revoked and current.reason == "deleted":
        return start + f" (the deleted file's version {current.version} stays the newest known)"
    return (start + f", and give {display(current.path)} its own doc_id if it is a stray copy (deleting or"
            f" renaming it alone leaves {cited.doc_id}@{cited.version} superseded)")


def identical_note(cited: VersionRecord, current: VersionRecord, versions: Mapping[int, VersionRecord],
                   display: Callable[[str], str] = str) -> str:
    """A stale citation's note when the current version holds byte-for-byte the cited version's
    content (same sha256), e.g. after a stray file sharing the doc_id was indexed in between and
    removed (SPEC §3, §4: the log is append-only and a version number is never reused, so the
    same bytes back are a new version); names the first version in between that came from
    another file. docs/decisions.md, "Index".
    """
    note = (f"version {current.version} is byte-identical to version {cited.version}"
            f" (the same sha256 {current.sha256[:12]})")
    between = [r for v, r in sorted(versions.items()) if cited.version < v < current.version and r.path != current.path]
    if between:
        note += (f": version {between[0].version} in between came from {display(between[0].path)}, which"
                 f" shares the doc_id '{current.doc_id}'")
    return note


def deleted_duplicate_hint(versions: Mapping[int, VersionRecord], display: Callable[[str], str] = str) -> str:
    """:func:`duplicate_hint` for an inactive newest version that a deleted stray file made,
    naming the newest declared version still on disk, or "".
    """
    newest = versions[max(versions)]
    if newest.declared or not (newest.revoked and newest.reason == "deleted"):
        return ""
    older = [r for v, r in sorted(versions.items(), reverse=True)
             if r.declared and not r.revoked and r.path != newest.path]
    return duplicate_hint(older[0], newest, display) if older else ""


def same_line_in(doc: EvidenceDocument, text: str, near: int) -> int | None:
    """The 1-based body line of ``doc`` whose text is exactly ``text`` (the re-anchor target of
    a line cited at ``near`` in another version): the same number if it matches, else the
    nearest, the earlier on a tie; None when no body line is ``text`` or ``text`` is blank.
    """
    if not text.strip():
        return None
    matches = [i for i, line in enumerate(doc.lines, 1) if line == text and not doc.is_front_matter_line(i)]
    return min(matches, key=lambda i: (abs(i - near), i)) if matches else None


def _renamed_spelling(claim: Claim, state: IndexSnapshot, record: VersionRecord, today: dt.date,
                      display: Callable[[str], str]) -> tuple[str, str, Edit | None] | None:
    """A deleted document whose file was renamed to another Unicode normal form (SPEC §3: a
    default doc_id is the path, so ``café.md`` spelled NFD by macOS and renamed to NFC is a
    deleted doc_id and a new one): the note for the message, the hint, and an exact re-anchor
    edit when the cited line exists verbatim in the renamed document's active version (never
    for a JSON answer, whose doc_id and id keys would both change); None when ``record`` was
    not deleted or no active document has the other spelling. docs/decisions.md, "Checks".
    """
    if not (record.revoked and record.reason == "deleted"):
        return None
    other = _other_normal_form(state, record.doc_id)
    versions = state.versions(other) if other is not None else {}
    if not versions:
        return None
    current = versions[max(versions)]
    if state.inactive_reason(current, today) is not None:
        return None
    form = ("decomposed (NFD)" if unicodedata.normalize("NFD", current.doc_id) == current.doc_id
            else "composed (NFC)")
    same = current.sha256 == record.sha256
    note = (f"its file was renamed to {display(current.path)}, which spells the doc_id {ascii(current.doc_id)}"
            f" with {form} characters" + (", with the same content" if same else ""))
    ref = claim.citation
    fix = None
    if ref is not None and claim.json_text is None:
        old_doc = state.document(record)
        if 0 < ref.line <= len(old_doc.lines):
            wanted = old_doc.lines[ref.line - 1]
            line = same_line_in(state.document(current), wanted, ref.line)
            if line is not None:
                new_id = f"{current.doc_id}@{current.version}:{line}"
                fix = Edit(claim.citation_span, f'{new_id} sha256:{current.sha256[:12]} "{wanted}"',
                           f"Cite {new_id}, the same line under the renamed file's spelling")
    if fix is not None:
        hint = (f"Cite {fix.new_text.split(' ')[0]}: the same line, under the doc_id as the renamed file spells"
                " it (`grounding check --fix` writes it).")
    else:
        hint = (f"Cite the document under the renamed file's spelling, {ascii(current.doc_id)}@{current.version}"
                " (`grounding cite` prints it), or give the file front matter with an explicit doc_id.")
    return note, hint, fix


def _other_normal_form(state: IndexSnapshot, doc_id: str) -> str | None:
    """The doc_id the index holds that differs from ``doc_id`` only by Unicode normalisation
    (NFC vs NFD), or None: two exact lookups, no scan.
    """
    for form in ("NFC", "NFD"):
        other = unicodedata.normalize(form, doc_id)
        if other != doc_id and state.versions(other):
            return other
    return None


def _reanchor(claim: Claim, state: IndexSnapshot, current: VersionRecord,
              record: VersionRecord | None) -> Edit | None:
    """A re-anchor edit when the cited line still exists verbatim in the current version.

    The line looked for is the cited line of an older version (its text is kept, SPEC §4)
    when that version's content is the one the citation's hash pins; otherwise (a hash
    mismatch on the current version number, or an older version whose content was replaced
    under the same number, ``version-reuse``) the content cited is not the one indexed, so it
    is the quote: the line now at that number may be a different fact.
    """
    if claim.citation is None or claim.json_text is not None:
        return None
    wanted = claim.quote
    pinned = claim.hash_prefix is None or record is None or record.sha256.startswith(claim.hash_prefix.lower())
    if record is not None and record.version < current.version and pinned:
        old_doc = state.document(record)
        if 0 < claim.citation.line <= len(old_doc.lines):
            wanted = old_doc.lines[claim.citation.line - 1]
    if wanted is None:
        return None
    line = same_line_in(state.document(current), wanted, claim.citation.line)
    if line is None:
        return None
    new_id = f"{current.doc_id}@{current.version}:{line}"
    new_text = f'{new_id} sha256:{current.sha256[:12]} "{wanted}"'
    if new_id == claim.citation.id and wanted == claim.quote:  # only the hash changes
        return Edit(claim.citation_span, new_text, f"Replace the hash with sha256:{current.sha256[:12]}")
    return Edit(claim.citation_span, new_text, f"Re-anchor to {new_id}")


CURRENT_FIELD_LINE = "same field in current version"
"""Message prefix of a stale citation's related location naming the same field's current line
(the server's "Cite the current line" action reads it)."""


def _same_field_now(claim: Claim, state: IndexSnapshot, current: VersionRecord,
                    record: VersionRecord | None) -> tuple[int, str] | None:
    """The current version's line of the field a stale citation cited (nearest to the old
    line number when the field occurs more than once), or None (the old version was never
    indexed, the cited line is no field line, or the field is gone).
    """
    ref = claim.citation
    if ref is None or record is None:
        return None
    old_doc = state.document(record)
    old_field = None if old_doc.is_front_matter_line(ref.line) else old_doc.field_lines.get(ref.line)
    if old_field is None:
        return None
    doc = state.document(current)
    numbers = [n for n, fl in doc.field_lines.items()
               if fl.field == old_field.field and not doc.is_front_matter_line(n)]
    if not numbers:
        return None
    number = min(numbers, key=lambda n: (abs(n - ref.line), n))
    return number, doc.lines[number - 1]


def _move_to_line(claim: Claim, record: VersionRecord, where: list[int], doc: EvidenceDocument) -> Edit | None:
    """The wrong-line fix, offered only when it is safe: the quote is exactly one line of the
    cited version (``where`` holds every line equal to it) and the hash pins that version, so
    quote + hash name the line. Markdown definitions only (a JSON claim repeats the line in
    ``line`` and ``id``).
    """
    ref = claim.citation
    hex_text = claim.hash_prefix or ""
    if (ref is None or claim.json_text is not None or len(where) != 1 or not hex_text
            or not record.sha256.startswith(hex_text) or doc.is_front_matter_line(where[0])):
        return None
    new_id = f"{ref.doc_id}@{ref.version}:{where[0]}"
    return Edit(claim.citation_span, f'{new_id} sha256:{hex_text} "{claim.quote}"', f"Cite line {where[0]} ({new_id})")


def _replace_quote(claim: Claim, line_text: str) -> Edit | None:
    """The quote-replacement fix, offered only when it is safe (SPEC §10 "safe fixes").

    Safe means the quote already says the same thing as the cited line: equal after the
    §7.4 normalisation (NFD, no-break or zero-width spaces, trailing spaces, full-width
    digits), or a part of it (a half line, a missing list marker). A quote that says
    something else is left for the writer: replacing it would silently change what the
    claim cites.
    """
    if claim.citation is None or claim.hash_prefix is None:
        return None
    quote = normalize(claim.quote or "")
    line = normalize(line_text)
    if not quote or (quote != line and quote not in line):
        return None
    new_text = f'{claim.citation.id} sha256:{claim.hash_prefix} "{line_text}"'
    return Edit(claim.citation_span, new_text, "Replace the quote with the exact cited line")


# -- claim value (§7.3) --------------------------------------------------------------------


def _claim_value(result: _ClaimResult, findings: list[Finding]) -> None:
    """SPEC §7.3 on what a reader sees: a Markdown sentence and the evidence value are both
    rendered (:func:`prose_text`: markup, tags, references and deleted text removed); a JSON
    claim's ``text`` is plain text.
    """
    from .drafts import prose_text

    assert result.value is not None
    markdown = result.claim.json_text is None
    raw = prose_text(result.value) if markdown else result.value
    value = normalize_value(raw)
    if not value:
        return
    sentence = normalize(prose_text(result.claim.sentence) if markdown else result.claim.sentence)
    if value in sentence:
        return
    findings.append(Finding(
        "claim-value-mismatch", result.claim.sentence_span,
        f"the sentence does not restate the cited value '{shorten(result.value)}' of"
        f" '{shorten(result.field or '')}': {_value_difference(raw, sentence)}",
        hint="State the cited value in the sentence, or cite the line that supports what it says.",
        citation=result.cited_id,
    ))


def _value_difference(raw_value: str, sentence: str) -> str:
    """What of the cited value the sentence lacks, compared as SPEC §7.3 does (NFKC, whitespace
    removed; ``sentence`` is already normalised): the part between the longest prefix and the
    longest suffix of the value that occur in ``sentence``, shown as the value writes it.

    The value is cut into units before the prefix and suffix are searched: a whitespace-
    separated word holding Latin letters is one unit (so English is reported by words, never
    as a fragment like ``'se'`` of "use"), anything else one character per unit (Chinese has no
    spaces). When every part occurs in the sentence on its own, only not in the value's order
    (``'每月8日'`` and ``'🎉'`` apart), the message says so instead of calling a part missing.
    Values over 200 code points get no detail.
    """
    units = _value_units(raw_value)
    value = "".join(unit for unit, _ in units)
    if len(value) > 200:
        return f"it is not in the sentence{_COMPARED}"
    whole = _show(units)
    head = next((n for n in range(len(units) - 1, 0, -1)
                 if "".join(u for u, _ in units[:n]) in sentence), 0)
    tail = next((n for n in range(len(units) - head - 1, 0, -1)
                 if "".join(u for u, _ in units[len(units) - n:]) in sentence), 0)
    if not head and not tail:
        return f"none of '{shorten(whole, 40)}' occurs in it{_COMPARED}"
    middle = units[head:len(units) - tail]
    parts = [part for part in (units[:head], middle, units[len(units) - tail:]) if part]
    if all("".join(u for u, _ in part) in sentence for part in parts):
        shown = " and ".join(f"'{shorten(_show(part), 30)}'" for part in parts)
        return f"it has {shown}, but not together as '{shorten(whole, 40)}'{_COMPARED}"
    found = " and ".join(f"'{shorten(_show(part), 30)}'" for part in (units[:head], units[len(units) - tail:]) if part)
    return f"it has {found} but not '{shorten(_show(middle), 40)}'{_COMPARED}"


_COMPARED = " (compared after NFKC, spaces removed)"
_LATIN = re.compile(r"[A-Za-z]")
_WORD = re.compile(r"\S+")
_TRAILING = re.compile(r"[\s" + re.escape(VALUE_TRAILING_PUNCTUATION) + r"]+$")


def _value_units(raw_value: str) -> list[tuple[str, bool]]:
    """The NFKC value without its SPEC §7.3 trailing punctuation, as ``(unit, space_before)``
    pairs (see :func:`_value_difference`); joining the units gives :func:`normalize_value`.
    """
    text = _TRAILING.sub("", unicodedata.normalize("NFKC", raw_value))
    units: list[tuple[str, bool]] = []
    for match in _WORD.finditer(text):
        spaced = match.start() > 0
        word = match.group()
        if _LATIN.search(word):
            units.append((word, spaced))
        else:
            units.extend((ch, spaced and i == 0) for i, ch in enumerate(word))
    return units


def _show(units: list[tuple[str, bool]]) -> str:
    """Units written back with the spaces the value had between them."""
    return "".join((" " if spaced and i else "") + unit for i, (unit, spaced) in enumerate(units))


# -- conflict gate (§7.4) and coverage (§7.5) ----------------------------------------------


@dataclass
class _Keys:
    """The keys the gate checks (SPEC §7.4), in checking order, and which of them carry the
    required fields (coverage's D, §7.5).
    """

    checked: list[ConflictKey]
    required: list[ConflictKey]


def _keys_for(field_name: str, draft: ParsedDraft, results: list[_ClaimResult],
              state: IndexSnapshot, today: dt.date) -> list[ConflictKey]:
    """Keys of a required field: the draft's subject, else the cited lines' subjects for that
    field, else every subject having it (SPEC §7.4).
    """
    if draft.subject is not None:
        return [(draft.subject, field_name)]
    cited = _unique([r.subject for r in results if r.field == field_name and r.line_text is not None],
                    keep_none=True)
    subjects = cited if cited else state.subjects_with_field(field_name, today)
    return [(s, field_name) for s in subjects]


def _checked_keys(draft: ParsedDraft, results: list[_ClaimResult], required: list[str],
                  state: IndexSnapshot, today: dt.date) -> _Keys:
    """SPEC §7.4: for every cited line (doc_id, version and line exist, valid or not) its own
    key, always (a draft ``subject`` never switches it off); for every required field the
    keys of :func:`_keys_for`. Meta fields are never checked.
    """
    required_keys: list[ConflictKey] = []
    for name in required:
        if not state.is_meta_field(name):
            required_keys.extend(k for k in _keys_for(name, draft, results, state, today)
                                 if k not in required_keys)
    cited_keys: list[ConflictKey] = []
    for r in results:
        if r.field is not None and r.line_text is not None and not state.is_meta_field(r.field):
            key = (r.subject, r.field)
            if key not in cited_keys:
                cited_keys.append(key)
    checked = list(required_keys)
    checked.extend(k for k in cited_keys if k not in checked)
    return _Keys(checked, required_keys)


def _gate(draft: ParsedDraft, results: list[_ClaimResult], keys: _Keys, state: IndexSnapshot,
          today: dt.date, findings: list[Finding], config: Config) -> GateResult:
    """GR108 (SPEC §7.4, §7.7, §15): on the ``fields`` item when the field is listed and on each
    definition citing a line of the conflicting key (both when both hold).
    """
    cited: dict[ConflictKey, list[tuple[str, int, int]]] = {}
    for r in results:
        identity = r.identity
        if identity is not None and r.line_text is not None and r.field is not None:
            cited.setdefault((r.subject, r.field), []).append(identity)
    gate = check_keys(state, keys.checked, today, cited=cited)
    field_spans = dict(reversed(draft.fields))
    required = set(keys.required)
    for conflict in gate.conflicts:
        key = (conflict.subject, conflict.field)

        def present(conflict: Conflict = conflict) -> tuple[str, DeferredLocations]:
            related = DeferredLocations(sum(len(group.sources) for group in conflict.summary.values),
                                        lambda: _conflict_locations(conflict, config))
            return conflict.describe() + "; Grounding does not pick a side", related

        # a key shared by thousands of lines and values: built once per snapshot and cited set
        cited_here = tuple(cited.get(key, ()))
        message, related = state.memo(("GR108", key, today, cited_here, config.evidence_root), present,
                                      of_summary=(key, today), doc_ids={doc_id for doc_id, _v, _l in cited_here})
        hint = ("Resolve it in the evidence (correct or revoke one source); until then the answer's"
                " status is 'conflict'. Grounding never picks a side.")
        if conflict.field in field_spans and key in required:
            findings.append(Finding("field-conflict", field_spans[conflict.field], message, hint=hint,
                                    related=related, conflict=ConflictDetail(conflict.summary, cited_here)))
        for r in results:
            if (r.subject, r.field) == key and r.field is not None and r.line_text is not None:
                findings.append(Finding("field-conflict", r.claim.citation_span, message, hint=hint,
                                        related=related, citation=r.cited_id,
                                        conflict=ConflictDetail(conflict.summary, cited_here, r.identity)))
    return gate


def _conflict_locations(conflict: Conflict, config: Config) -> tuple[Location, ...]:
    """A conflict's related locations (SPEC §7.4): each value's listed sources in order, as
    ``path:line`` with ``field：value`` (an image attribute: its image, line 1, named by its
    region's id). Made when a finding's ``related`` is first read (:class:`DeferredLocations`);
    the display path and image test are worked out once per evidence file (a key's thousands
    of sources come from a few hundred files).
    """
    shown: dict[str, tuple[str, bool]] = {}
    related = []
    for kl in conflict.related_lines():
        where = shown.get(kl.path)
        if where is None:
            where = shown[kl.path] = (config.evidence_display(kl.path), is_image_path(kl.path))
        if where[1]:
            related.append(Location(where[0], 1, f"{source_id(kl)} {kl.field}：{kl.value}"))
        else:
            related.append(Location(where[0], kl.line, f"{kl.field}：{kl.value}"))
    return tuple(related)


def _coverage(results: list[_ClaimResult], required: list[ConflictKey], gate: GateResult) -> float:
    """SPEC §7.5: |valid cited lines in D| / |D|, D = the active lines of the required keys
    (their counts come from the gate's key summaries; a valid claim's line is active and
    non-meta, so it is in D exactly when its own key is a required key).
    """
    wanted = set(required)
    size = sum(gate.totals.get(k, 0) for k in wanted)
    if not size:
        return 1.0
    cited = {r.identity for r in results if r.valid and r.identity is not None and r.field is not None
             and (r.subject, r.field) in wanted}
    return len(cited) / size


def _status(gate: GateResult, valid: list[_ClaimResult], missing: list[str]) -> Status:
    if gate.conflicts:
        return Status.CONFLICT
    if not valid:
        return Status.ABSTAIN
    return Status.PARTIAL if missing else Status.ANSWERED


# -- uncited claims (§7.6) -----------------------------------------------------------------


def _uncited(draft: ParsedDraft, state: IndexSnapshot, config: Config, today: dt.date,
             findings: list[Finding]) -> None:
    if not draft.uncited:
        return
    for sentence in draft.uncited:
        if config.strict:
            findings.append(Finding(
                "uncited-claim", sentence.span, "this sentence has no citation (strict mode)",
                hint="Add a footnote citing the evidence line it restates, or remove the sentence."))
            continue
        term = state.known_term_in(normalize(sentence.text), today)
        if term is not None:
            findings.append(Finding(
                "uncited-claim", sentence.span,
                f"this sentence states '{shorten(term)}', a known field or value, without a citation",
                hint="Add a footnote citing the evidence line it restates (in an editor, the"
                " 'Cite' quick fix finds"
                " candidates)."))


# -- helpers -------------------------------------------------------------------------------


def _unique(items: list[str | None] | list[str], keep_none: bool = False) -> list:  # type: ignore[type-arg]
    out: list[str | None] = []
    for item in items:
        if (item is not None or keep_none) and item not in out:
            out.append(item)
    return out


def _sorted_unique(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, Span, str]] = set()
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: (f.span.start_line, f.span.start_col, f.code)):
        key = (f.name, f.span, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


__all__ = ["ResolvedContext", "Visibility", "check_draft", "has_letter_or_digit", "resolve_context"]
