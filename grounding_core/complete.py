r"""Completion inside a footnote definition (SPEC §5.1, §10), free of editor types.

On a definition line ``[^label]: …`` with the cursor in the citation id, three stages:

1. ``[^1]: sch|`` — **doc ids** of active documents starting with what was typed
   (label = doc id, detail = its title); the edit replaces the typed prefix with the id;
2. ``[^1]: schedule@|`` — **versions** of that document, newest first (detail ``active``,
   ``stale`` for an older version, ``inactive`` for a newest version that is revoked, expired
   or not yet effective); the edit replaces the digits typed after ``@``;
3. ``[^1]: schedule@2:|`` — **lines** of that version: every non-blank line outside front
   matter, sorted by line number (label = the 1-based line number, detail = the line text,
   documentation = field and value for a field line). Accepting one replaces everything from
   the start of the id to the end of the line with
   ``schedule@2:7 sha256:<12 hex> "<the whole line>"``, so a half-typed or broken rest of the
   definition is rewritten into a verified citation.

Image documents (SPEC §12): ``[^1]: shapes@1#|`` (or ``#r``, ``#r2``, and ``shapes@1:|`` on an
image version) offers **regions with their attributes**: one entry per measured attribute of
each region whose number starts with what was typed (label ``r2 颜色：绿色``, detail the
region's colour, shape, size and box), at most :data:`MAX_REGIONS` regions; accepting one
writes ``shapes@1#r2 sha256:<12 hex> "颜色：绿色"``.

Typing ``[^1]:`` (no space yet) offers doc ids that insert the missing space too. Lines
outside definitions get nothing. Doc ids are read with a limit (:data:`MAX_DOC_IDS`): the
list is then marked incomplete, and typing more characters narrows it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .edits import HASH_PREFIX
from .images import Measurement
from .index import IndexSnapshot, VersionRecord
from .model import Span

MAX_DOC_IDS = 100
"""Doc ids offered at most per request (completion never lists the whole index)."""
MAX_REGIONS = 50
"""Regions offered at most per request (five entries each); typing the number narrows them."""

_DEFINITION = re.compile(r"\[\^[^\]\s]+\]:(?P<space> ?)")
_TYPED = re.compile(
    r"(?P<doc>[^\s@:\[\]\"]*)(?:@(?P<version>[0-9]*)(?::(?P<line>[0-9]*)|#(?P<region>r?[0-9]*))?)?")


@dataclass(frozen=True, slots=True)
class Entry:
    """One completion item: ``span`` (in the draft, one line) is replaced by ``new_text``.
    ``kind`` is ``"document"``, ``"version"``, ``"line"`` or ``"region"`` (memory ids, SPEC §11:
    ``"scope"``, ``"key"``, ``"memory-version"``; ``server/features/memory.py``).
    """

    label: str
    kind: str
    detail: str
    documentation: str
    sort_text: str
    filter_text: str
    span: Span
    new_text: str
    preselect: bool = False


@dataclass(frozen=True, slots=True)
class Completions:
    entries: tuple[Entry, ...]
    incomplete: bool = False
    """True when more doc ids match than were listed."""


def citation_completions(lines: Sequence[str], line: int, column: int, snapshot: IndexSnapshot,
                         today: dt.date, language: str = "zh") -> Completions | None:
    """Completions for the cursor at 0-based ``line`` and code-point ``column`` of a draft
    whose lines (no terminators) are ``lines``; None when the cursor is not in the citation id
    of a definition line. Reads at most :data:`MAX_DOC_IDS` documents, one version list or
    one version's text.
    """
    if line >= len(lines):
        return None
    text = lines[line]
    match = _DEFINITION.match(text)
    if match is None or column < match.end():
        return None
    id_start = match.end()
    typed = _TYPED.fullmatch(text, id_start, column)
    if typed is None:
        return None  # the cursor is past the id (in the hash or quote)
    doc_prefix = typed["doc"]
    pad = "" if match["space"] else " "
    if typed["version"] is None:
        return _doc_entries(snapshot, today, doc_prefix, pad, Span.line(line, id_start, column))
    if typed["line"] is None and typed["region"] is None:
        at = id_start + len(doc_prefix) + 1
        return _version_entries(snapshot, today, doc_prefix, typed["version"], Span.line(line, at, column))
    if not typed["version"] or typed["version"].startswith("0"):
        return Completions(())
    record = snapshot.record(doc_prefix, int(typed["version"]))
    measurement = snapshot.measurement(record.sha256) if record is not None else None
    if record is not None and measurement is not None:  # image hook (SPEC §12): regions
        number = (typed["region"] or "").removeprefix("r") if typed["line"] is None else ""
        return _region_entries(record, measurement.in_language(language), number, pad,
                               Span.line(line, id_start, len(text)))
    if typed["line"] is None:
        return Completions(())
    return _line_entries(snapshot, doc_prefix, int(typed["version"]), typed["line"], pad,
                         Span.line(line, id_start, len(text)))


def _doc_entries(snapshot: IndexSnapshot, today: dt.date, prefix: str, pad: str, span: Span) -> Completions:
    found = snapshot.doc_ids(prefix, limit=MAX_DOC_IDS + 1)
    entries = []
    for doc_id in found[:MAX_DOC_IDS]:
        record = snapshot.newest(doc_id)
        if record is None or not snapshot.is_active(record, today):
            continue
        doc = snapshot.document(record)
        entries.append(Entry(doc_id, "document", doc.title, f"{doc_id}@{record.version} · {record.path}",
                             doc_id, doc_id, span, pad + doc_id))
    return Completions(tuple(entries), incomplete=len(found) > MAX_DOC_IDS)


def _version_entries(snapshot: IndexSnapshot, today: dt.date, doc_id: str, prefix: str,
                     span: Span) -> Completions:
    versions = snapshot.versions(doc_id)
    if not versions:
        return Completions(())
    newest = max(versions)
    entries = []
    for rank, number in enumerate(sorted(versions, reverse=True)):
        label = str(number)
        if not label.startswith(prefix):
            continue
        record = versions[number]
        reason = snapshot.inactive_reason(record, today)
        if number != newest:
            detail = "stale"
        else:
            detail = "active" if reason is None else "inactive"
        documentation = (f"{doc_id}@{number} · {record.path} · sha256:{record.sha256[:HASH_PREFIX]}"
                         + (f" · not active: {reason}" if reason else ""))
        entries.append(Entry(label, "version", detail, documentation, f"{rank:06d}", label, span, label,
                             preselect=number == newest))
    return Completions(tuple(entries))


def _line_entries(snapshot: IndexSnapshot, doc_id: str, version: int, prefix: str, pad: str,
                  span: Span) -> Completions:
    record = snapshot.record(doc_id, version)
    if record is None:
        return Completions(())
    doc = snapshot.document(record)
    entries = []
    for number in range(doc.front.end_line + 1, len(doc.lines) + 1):
        text = doc.lines[number - 1]
        label = str(number)
        if not text.strip() or not label.startswith(prefix):
            continue
        citation = f"{doc_id}@{version}:{number}"
        field_line = doc.field_lines.get(number)
        if field_line is not None:
            meta = " (meta field: never supports an answer)" if snapshot.is_meta_field(field_line.field) else ""
            documentation = f"{field_line.field} = {field_line.value}{meta}"
        else:
            documentation = "not a field line"
        entries.append(Entry(label, "line", text, f"{citation} · {documentation}", f"{number:08d}", citation,
                             span, f'{pad}{citation} sha256:{record.sha256[:HASH_PREFIX]} "{text}"'))
    return Completions(tuple(entries))


def _region_entries(record: VersionRecord, measurement: Measurement, prefix: str, pad: str,
                    span: Span) -> Completions:
    regions = [r for r in measurement.regions if str(r.number).startswith(prefix)]
    entries = []
    for region in regions[:MAX_REGIONS]:
        base = f"{record.doc_id}@{record.version}#{region.name}"
        summary = " ".join(value for _, value in region.attributes[2:]) + f" at {region.attributes[0][1]}"
        for index, (name, value) in enumerate(region.attributes):
            quote = f"{name}：{value}"
            entries.append(Entry(
                f"{region.name} {quote}", "region", f"{region.name}: {summary}",
                f"{base} · {quote} (measured from the image; SPEC §12)",
                f"{region.number:08d}{index}", f"{base} {name} {value}", span,
                f'{pad}{base} sha256:{record.sha256[:HASH_PREFIX]} "{quote}"'))
    return Completions(tuple(entries), incomplete=len(regions) > MAX_REGIONS)


__all__ = ["MAX_DOC_IDS", "MAX_REGIONS", "Completions", "Entry", "citation_completions"]
