"""Paste-ready verified citations of active evidence lines (SPEC §5, §9 ``grounding cite``, §14).

One module answers "how do I cite this line?" for the CLI (``grounding cite``), the MCP
``cite`` tool and, later, the editor: give a document and a line (by doc_id or by evidence
path), or text to look for, and get citations whose id, hash and quote are taken from the
index, so they verify by construction. A line that cannot support an answer is refused with
a :class:`CiteError` that says why (an unknown, stale or inactive source, a blank line, a
front-matter line, a meta field).

Reads the index only through :class:`~grounding_core.index.IndexSnapshot` (the frozen
interface checks use): a snapshot and a date in, values out; every lookup is bounded by what
it returns (one document, one path, one search). Lines are 1-based; paths are ``/``-separated
and relative to the evidence root unless said otherwise.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from .evidence import EvidenceDocument, split_marker
from .image_claims import is_region_id, parse_region_id
from .images import ATTRIBUTES_PER_REGION, ImageDocument, attribute_line_number, attribute_of_line
from .index import IndexSnapshot, VersionRecord
from .model import CLAIM_KEYS, IMAGE_CLAIM_KEYS
from .text import normalize, shorten

HASH_PREFIX = 12
"""Hex digits of the sha256 written into a Markdown citation (SPEC §5.1 allows 8 to 64)."""

TARGET_RE = re.compile(r"(?P<doc_id>[^\s@:\[\]\"]+)(?:@(?P<version>[1-9][0-9]{0,17}))?(?::(?P<line>[1-9][0-9]{0,17}))?")
"""``DOC_ID[@VERSION][:LINE]``: the citation id grammar of SPEC §5 with version and line optional."""


class CiteError(ValueError):
    """A line or document that cannot be cited, with the reason.

    ``name`` is the SPEC §7 finding a draft citing it would get (``unknown-source``,
    ``stale-citation``, ``inactive-source``, ``meta-field``), or ``blank-line`` for a line with
    nothing on it, or ``no-match`` when a search found nothing citable. ``hint`` says what to
    do instead.
    """

    def __init__(self, name: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.name = name
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message + (f" ({self.hint})" if self.hint else "")


@dataclass(frozen=True, slots=True)
class Citation:
    """One verified citation of an active evidence line (SPEC §5).

    ``quote`` is the whole line verbatim; ``text`` the line without its list marker;
    ``field``/``value`` are set for a field line (SPEC §3) and None otherwise; ``path`` is the
    evidence file relative to the evidence root; ``sha256`` is the full hash of its bytes.
    """

    doc_id: str
    version: int
    line: int
    sha256: str
    quote: str
    text: str
    field: str | None
    value: str | None
    path: str
    region: str | None = None
    """For an image (SPEC §12): the region (``"r2"``) whose attribute ``line`` is; the citation
    id is then ``DOC_ID@VERSION#rN`` and the quote ``FIELD：VALUE``."""

    @property
    def id(self) -> str:
        """``DOC_ID@VERSION:LINE`` (an image region: ``DOC_ID@VERSION#rN``)."""
        if self.region is not None:
            return f"{self.doc_id}@{self.version}#{self.region}"
        return f"{self.doc_id}@{self.version}:{self.line}"

    def footnote(self, label: str | int = 1, hash_length: int = HASH_PREFIX) -> str:
        """The Markdown definition line: ``[^1]: schedule@2:6 sha256:9f86d0818ab1 "- 活动时间：周四16:30"``."""
        return f'[^{label}]: {self.id} sha256:{self.sha256[:hash_length]} "{self.quote}"'

    def claim(self) -> dict[str, object] | None:
        """The eight-key JSON claim of SPEC §5.2 (keys in §5's order), or None for a line that
        is not a field line (a JSON claim needs a ``field``; Markdown may still cite it).
        """
        if self.field is None:
            return None
        if self.region is not None:  # the nine keys of an image claim (SPEC §15)
            image: dict[str, object] = {
                "text": self.quote, "quote": self.quote, "id": self.id, "doc_id": self.doc_id,
                "version": self.version, "region": self.region, "sha256": self.sha256, "field": self.field,
                "support_type": "measured"}
            return {key: image[key] for key in IMAGE_CLAIM_KEYS}
        values: dict[str, object] = {
            "text": self.text, "quote": self.quote, "id": self.id, "doc_id": self.doc_id,
            "version": self.version, "line": self.line, "sha256": self.sha256, "field": self.field,
        }
        return {key: values[key] for key in CLAIM_KEYS}


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed ``DOC_ID[@VERSION][:LINE]``; version and line None when not given."""

    doc_id: str
    version: int | None = None
    line: int | None = None


def parse_target(text: str) -> Target | None:
    """Read ``schedule``, ``schedule:6``, ``schedule@2`` or ``schedule@2:6``; None if it is none of them."""
    m = TARGET_RE.fullmatch(text.strip())
    if m is None:
        return None
    return Target(m["doc_id"], int(m["version"]) if m["version"] else None, int(m["line"]) if m["line"] else None)


# -- one line --------------------------------------------------------------------------------


def active_record(snapshot: IndexSnapshot, doc_id: str, today: dt.date, version: int | None = None) -> VersionRecord:
    """The version to cite: ``version`` if given, else the newest; it must be the active one.

    Raises :class:`CiteError`: ``unknown-source`` (no such doc_id or version),
    ``stale-citation`` (an older version), ``inactive-source`` (revoked, deleted, expired or
    not yet effective).
    """
    versions = snapshot.versions(doc_id)
    if not versions:
        close = snapshot.similar_doc_ids(doc_id)
        raise CiteError("unknown-source", f"no evidence document has doc_id '{shorten(doc_id)}'",
                        f"did you mean '{close[0]}'?" if close else "check the doc_id against the evidence folder")
    newest = max(versions)
    if version is not None and version not in versions:
        raise CiteError("unknown-source" if version > newest else "stale-citation",
                        f"'{doc_id}' has no indexed version {version}; the newest is {newest}",
                        f"cite {doc_id}@{newest}")
    if version is not None and version < newest:
        from .verify import duplicate_hint, duplicate_note

        duplicate = duplicate_note(versions[version], versions[newest])
        raise CiteError("stale-citation",
                        f"{doc_id}@{version} is not current: version {newest} supersedes it, and only the"
                        " current version can support an answer" + (f" ({duplicate})" if duplicate else ""),
                        duplicate_hint(versions[version], versions[newest]) if duplicate
                        else f"cite {doc_id}@{newest}: the line you meant may have another number there")
    record = versions[newest]
    reason = snapshot.inactive_reason(record, today)
    if reason is not None:
        from .verify import deleted_duplicate_hint

        raise CiteError("inactive-source", f"{doc_id}@{newest} is not active: {reason}",
                        deleted_duplicate_hint(versions) or
                        "revoked, deleted, expired and not-yet-effective documents never support an answer;"
                        " cite another source")
    return record


def cite_line(snapshot: IndexSnapshot, doc_id: str, line: int, today: dt.date, version: int | None = None) -> Citation:
    """A verified citation of 1-based ``line`` of the active version of ``doc_id``.

    Raises :class:`CiteError` for an inactive or unknown source (see :func:`active_record`), a
    line beyond the end (``unknown-source``), a front-matter line or a meta field
    (``meta-field``: metadata about the document never supports an answer) and a blank line
    (``blank-line``).
    """
    try:
        record = active_record(snapshot, doc_id, today, version)
    except CiteError as exc:
        if exc.name != "stale-citation" or version is None or "duplicate-doc-id" in exc.message:
            raise
        hint = _same_line_hint(snapshot, doc_id, version, line)
        raise CiteError(exc.name, exc.message, hint or exc.hint) from None
    return _citation(snapshot, record, snapshot.document(record), line)


def _same_line_hint(snapshot: IndexSnapshot, doc_id: str, version: int, line: int) -> str:
    """"the same line is DOC@V:N: grounding cite DOC:N" when ``line`` of the superseded
    ``version`` still exists verbatim in the current one (the line ``grounding check`` re-anchors
    to, :func:`grounding_core.verify.same_line_in`); else, when it was a field line and the
    current version has that field, the field's current line (nearest to ``line``, as
    ``grounding check``'s stale-citation message names it); else "".
    """
    from .verify import same_line_in

    old, newest = snapshot.record(doc_id, version), snapshot.newest(doc_id)
    if old is None or newest is None or newest.version == version:
        return ""
    old_doc = snapshot.document(old)
    if not 0 < line <= len(old_doc.lines) or old_doc.is_front_matter_line(line):
        return ""
    doc = snapshot.document(newest)
    same = same_line_in(doc, old_doc.lines[line - 1], line)
    if same is not None:
        return f"the same line is {doc_id}@{newest.version}:{same}: grounding cite {doc_id}:{same}"
    # the line changed: name the same field's current line, as `grounding check` does
    old_field = old_doc.field_lines.get(line)
    numbers = [] if old_field is None else [
        n for n, fl in doc.field_lines.items() if fl.field == old_field.field and not doc.is_front_matter_line(n)]
    if not numbers:
        return ""
    number = min(numbers, key=lambda n: (abs(n - line), n))
    return (f"the line changed; its field '{shorten(old_field.field if old_field else '')}' is now"
            f" {doc_id}@{newest.version}:{number}: '{shorten(doc.lines[number - 1])}' (grounding cite"
            f" {doc_id}:{number}; check that the sentence still says what that line says)")


def cite_path(snapshot: IndexSnapshot, rel_path: str, line: int, today: dt.date, shown_path: str = "") -> Citation:
    """A verified citation of 1-based ``line`` of the evidence file ``rel_path``.

    The file must hold the active version of its document. An archive file holding an older
    version is ``stale-citation`` (the message names the current version and, when the same
    line still exists there, its number). A file that is not in the index is
    ``unknown-source``. ``shown_path`` is how messages name the file (default ``rel_path``).
    """
    shown = shown_path or rel_path
    record = snapshot.record_for_path(rel_path)
    if record is None or (record.revoked and record.reason == "deleted"):
        raise CiteError("unknown-source", f"{shown} is not in the index",
                        "it must be an evidence file matching evidence_globs that indexed without errors"
                        " (see `grounding index`)")
    newest = snapshot.newest(record.doc_id)
    if newest is not None and newest.version != record.version:
        hint = (_same_line_hint(snapshot, record.doc_id, record.version, line)
                or f"cite {newest.doc_id}@{newest.version} (the file {newest.path} under the evidence folder)")
        raise CiteError("stale-citation",
                        f"{shown} holds version {record.version} of '{record.doc_id}', but version"
                        f" {newest.version} is current", hint)
    record = active_record(snapshot, record.doc_id, today)
    return _citation(snapshot, record, snapshot.document(record), line)


def _citation(snapshot: IndexSnapshot, record: VersionRecord, doc: EvidenceDocument, line: int) -> Citation:
    where = f"{record.doc_id}@{record.version}"
    if line < 1 or line > len(doc.lines):
        raise CiteError("unknown-source", f"{where} has {len(doc.lines)} lines; there is no line {line}",
                        "lines count every physical line of the file, front matter included")
    if doc.is_front_matter_line(line):
        raise CiteError("meta-field",
                        f"{where}:{line} is a front-matter line (lines 1-{doc.front.end_line}): it describes the"
                        " document (doc_id, version, status, dates) and never supports an answer",
                        f"cite a body line, from line {doc.front.end_line + 1} on")
    quote = doc.lines[line - 1]
    if not quote.strip():
        raise CiteError("blank-line", f"{where}:{line} is blank: there is nothing on it to cite",
                        _nearest_hint(doc, line))
    field_line = doc.field_lines.get(line)
    if field_line is not None and snapshot.is_meta_field(field_line.field):
        raise CiteError("meta-field",
                        f"{where}:{line} is the meta field '{shorten(field_line.field)}', which says something"
                        " about the document rather than answering a question, so it never supports an"
                        " answer (meta_fields in grounding.toml)",
                        "cite the line that states the fact itself")
    return Citation(
        doc_id=record.doc_id, version=record.version, line=line, sha256=record.sha256, quote=quote,
        text=quote if isinstance(doc, ImageDocument) else split_marker(quote),
        field=field_line.field if field_line else None,
        value=field_line.value if field_line else None, path=record.path,
        region=f"r{attribute_of_line(line)[0]}" if isinstance(doc, ImageDocument) else None,
    )


def _nearest_hint(doc: EvidenceDocument, line: int) -> str:
    body = range(doc.front.end_line + 1, len(doc.lines) + 1)
    filled = [i for i in body if doc.lines[i - 1].strip()]
    if not filled:
        return "the document has no body lines"
    near = min(filled, key=lambda i: (abs(i - line), i))
    return f"the nearest line with text is {near}: '{shorten(doc.lines[near - 1])}'"


# -- one image region (SPEC §12) -------------------------------------------------------------


def is_region_target(snapshot: IndexSnapshot, text: str) -> bool:
    """Whether ``text`` means an image region: ``DOC_ID@VERSION#rN`` (any ``#``/``＃`` after the
    last ``@``, :func:`~grounding_core.image_claims.is_region_id`), or ``DOC_ID#rN`` when the
    part before the first ``#``/``＃`` is an indexed doc_id and the whole text is not one (a
    doc_id may hold ``#``).
    """
    text = text.strip()
    if is_region_id(text):
        return True
    cut = _region_mark(text)
    return (cut > 0 and "@" not in text and not snapshot.versions(text)
            and bool(snapshot.versions(text[:cut])))


def _region_mark(text: str) -> int:
    """The offset of the first ``#`` or ``＃`` in ``text``, or -1."""
    found = [i for i in (text.find("#"), text.find("＃")) if i >= 0]
    return min(found) if found else -1


def cite_region(snapshot: IndexSnapshot, target: str, today: dt.date, grep: str | None = None) -> CiteResult:
    """Verified citations of the measured attributes of one image region (SPEC §12).

    ``target`` is ``DOC_ID@VERSION#rN`` (the version must be the active one) or ``DOC_ID#rN``
    (the active version). The citations are the region's five attributes in
    :data:`~grounding_core.images.FIELDS` order (those whose ``FIELD：VALUE`` contains ``grep``
    when given), each with id ``DOC_ID@VERSION#rN`` and the quote ``FIELD：VALUE``; their
    :meth:`Citation.claim` is the nine-key image claim. An attribute whose field is a meta
    field is listed in ``skipped``.

    Raises ValueError for text that is not a region id (a region number of ``0``, with a
    leading zero or full-width digits, a full-width ``＃``, ``#2`` without ``r``, ``#r1:3``: the
    message says what to write, :func:`~grounding_core.image_claims.parse_region_id`), and
    :class:`CiteError`: ``unknown-source`` for a text document or a region the image does not
    have (naming the regions it has), ``no-match`` when ``grep`` matches no attribute, and
    those of :func:`active_record`.
    """
    text = target.strip()
    if not is_region_id(text):  # DOC_ID#rN: the active version
        cut = _region_mark(text)
        newest = snapshot.newest(text[:cut]) if cut > 0 else None
        if newest is not None:
            text = f"{text[:cut]}@{newest.version}{text[cut:]}"
    ref, problem = parse_region_id(text)
    if ref is None:
        raise ValueError(problem)
    record = active_record(snapshot, ref.doc_id, today, ref.version)
    where = f"{ref.doc_id}@{ref.version}"
    doc = snapshot.document(record)
    if not isinstance(doc, ImageDocument):
        raise CiteError("unknown-source", f"{where} is a text document, not an image: it has lines, not regions",
                        f"cite a line as {where}:LINE")
    measurement = doc.measurement
    count = len(measurement.regions) if measurement is not None else 0
    if measurement is None or measurement.region(ref.name) is None:
        have = f"r1 to r{count}" if count > 1 else ("only r1" if count == 1 else "none")
        raise CiteError("unknown-source", f"{where} has {count} measured region(s) ({have}); there is no {ref.name}",
                        f"list its regions' attributes with `grounding cite {ref.doc_id}`" if count else
                        "an image without measured regions has nothing to cite")
    citations: list[Citation] = []
    skipped: list[Skipped] = []
    for index in range(ATTRIBUTES_PER_REGION):
        number = attribute_line_number(ref.region, index)
        if grep is not None and not matches(doc.lines[number - 1], grep):
            continue
        try:
            citations.append(_citation(snapshot, record, doc, number))
        except CiteError as exc:
            skipped.append(Skipped(ref.doc_id, number, exc.name, exc.message))
    if grep is not None and not citations:
        raise CiteError("no-match", f"no measured attribute of {ref.id} contains '{shorten(grep)}'",
                        f"a region has {ATTRIBUTES_PER_REGION} attributes; list them with `grounding cite {ref.id}`")
    return CiteResult(tuple(citations), tuple(skipped))


# -- many lines ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Skipped:
    """A matching line left out, and why (a :class:`CiteError` name and message)."""

    doc_id: str
    line: int
    name: str
    message: str


@dataclass(frozen=True)
class CiteResult:
    """Citations found for a request, and the matching lines left out (with reasons)."""

    citations: tuple[Citation, ...]
    skipped: tuple[Skipped, ...] = ()


def matches(line_text: str, needle: str) -> bool:
    """``needle`` occurs in the line verbatim, or after NFKC with whitespace removed (so ``３天``
    finds ``3天`` and ``到 账`` finds ``到账``).
    """
    if needle in line_text:
        return True
    folded = normalize(needle)
    return bool(folded) and folded in normalize(line_text)


def cite_document(snapshot: IndexSnapshot, doc_id: str, today: dt.date, grep: str | None = None,
                  version: int | None = None) -> CiteResult:
    """Citations of the active version's body lines (those matching ``grep`` when given).

    Blank lines are left out silently; meta-field lines that match are listed in ``skipped``.
    Raises :class:`CiteError` for an unknown or inactive document, and ``no-match`` when
    ``grep`` matches no citable line.
    """
    record = active_record(snapshot, doc_id, today, version)
    doc = snapshot.document(record)
    citations: list[Citation] = []
    skipped: list[Skipped] = []
    for number in range(doc.front.end_line + 1, len(doc.lines) + 1):
        text = doc.lines[number - 1]
        if not text.strip() or (grep is not None and not matches(text, grep)):
            continue
        try:
            citations.append(_citation(snapshot, record, doc, number))
        except CiteError as exc:
            skipped.append(Skipped(doc_id, number, exc.name, exc.message))
    if grep is not None and not citations:
        found = "; ".join(s.message for s in skipped[:3])
        raise CiteError("no-match", f"no citable line of {doc_id}@{record.version} contains '{shorten(grep)}'"
                        + (f" ({found})" if found else ""),
                        "try a shorter text, or list the document's lines with `grounding cite "
                        f"{doc_id}`")
    return CiteResult(tuple(citations), tuple(skipped))


def search_citations(snapshot: IndexSnapshot, query: str, today: dt.date, limit: int = 20) -> CiteResult:
    """Citations of active lines matching ``query`` across the corpus, best first (SPEC §4 FTS).

    Every whitespace-separated term must occur in the line, compared after Unicode NFKC on
    both sides (``７天`` finds ``7天`` and back; see :meth:`IndexSnapshot.search`). Image regions'
    measured attributes are not in the full-text index (``cite_document``/``cite_region`` grep
    one image; the no-match hint says so). Hits on inactive documents, meta
    fields or lines the snapshot does not know are listed in ``skipped``. Raises ``no-match`` when
    nothing citable matches. ``limit`` caps the citations returned.
    """
    if not query.strip():
        raise CiteError("no-match", "the search text is empty", "give a word or phrase that the line contains")
    citations: list[Citation] = []
    skipped: list[Skipped] = []
    for hit in snapshot.search(query, limit * 2 + 10):
        if len(citations) >= limit:
            break
        try:
            citations.append(cite_line(snapshot, hit.doc_id, hit.line, today))
        except CiteError as exc:
            skipped.append(Skipped(hit.doc_id, hit.line, exc.name, exc.message))
    if not citations:
        why = "; ".join(s.message for s in skipped[:3])
        raise CiteError("no-match",
                        f"no active evidence line contains '{shorten(query)}'" + (f" ({why})" if why else ""),
                        "search for a shorter text: each space-separated term must occur in the line"
                        " (compared after NFKC, so ７天 finds 7天); the measured attributes of images"
                        " are searched per image: grounding cite IMAGE_DOC_ID --grep TEXT")
    return CiteResult(tuple(citations), tuple(skipped))


__all__ = [
    "HASH_PREFIX", "Citation", "CiteError", "CiteResult", "Skipped", "Target", "active_record",
    "cite_document", "cite_line", "cite_path", "cite_region", "is_region_target", "matches", "parse_target",
    "search_citations",
]
