"""The frozen index snapshot: everything a check may ask of the index (SPEC §3 "Active", §4, §7).

An :class:`IndexSnapshot` answers for one state of the event log, ``replay(seq)``. It is a
value: it never changes after it is made, it may be handed to any thread, and two snapshots
with the same :attr:`IndexSnapshot.generation` give the same answers. Checks, navigation,
context compilation and the answer generator read the index **only** through this class, so
``--at N`` is exact and a language server can check against one snapshot while the indexer
writes the next.

Rules for implementations (the SQL store in ``grounding_core.store`` and the reference
:class:`MemorySnapshot`):

- Cost follows the question, never the corpus: every method is an indexed lookup whose cost
  is proportional to what it returns (a version's lines, one conflict key's rows, the terms
  that can occur in one sentence), except the few methods marked *corpus-wide*, which exist
  for ``grounding index``/``grounding conflicts``, the server's evidence diagnostics and the
  benchmarks and must never run per keystroke.
- Nothing proportional to the corpus is kept in Python memory; a bounded cache (parsed
  documents, term candidates) is allowed.
- "Today" is always a parameter: activity (SPEC §3) depends on ``effective_from`` /
  ``effective_until``, so the same snapshot answers for any date.

Units: lines and versions are 1-based integers, as in citations; strings are Python ``str``
(code points).
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from .events import REPLACED_REASON
from .evidence import EvidenceDocument
from .images import ImageDocument, Measurement
from .memory import EmptyMemory, MemoryEntry, active_of
from .text import normalize, normalize_value

T = TypeVar("T")

ConflictKey = tuple[str | None, str]
"""``(subject, field)`` (SPEC §3, §7.4); ``None`` is the key of lines without a subject."""

LineIdentity = tuple[str, int, int]
"""``(doc_id, version, line)`` of an evidence line (SPEC §7.5 identities)."""


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """One (doc_id, version) as of the snapshot: its current content and whether it was revoked.

    ``content_id`` names the exact content (the sequence number of the ``import`` event that
    brought it), so :meth:`IndexSnapshot.document` can read its text on demand.
    ``previous_shas`` lists contents the same declared version held before (``version-reuse``).
    ``seq`` is the sequence number of the last event that changed this record.

    The front-matter facts activity needs (SPEC §3) travel with the record, so deciding
    whether a version is active never parses its text: ``status``, ``effective_from`` /
    ``effective_until``, plus ``title``, ``subject`` (None: no subject) and ``line_count``.
    ``first_sha256`` is the sha256 of the first content this (doc_id, version) ever held
    (``version-reuse`` holds while the current content differs from it; docs/decisions.md).
    An implementation that does not know a fact leaves its default (``line_count`` -1).
    """

    doc_id: str
    version: int
    sha256: str
    path: str
    declared: bool
    content_id: int
    revoked: bool = False
    reason: str = ""
    seq: int = 0
    previous_shas: tuple[str, ...] = ()
    status: str = "active"
    effective_from: dt.date | None = None
    effective_until: dt.date | None = None
    title: str = ""
    subject: str | None = None
    line_count: int = -1
    first_sha256: str = ""
    front_end: int = -1
    """The 1-based line closing the front matter (0: none; -1: not known)."""


@dataclass(frozen=True, slots=True)
class ParseSettings:
    """How version texts are read into fields (SPEC §2 keys); part of a snapshot's identity."""

    separators: tuple[str, ...] = ("：",)
    meta_fields: tuple[str, ...] = ("版本说明", "来源", "性质")
    subject_fields: tuple[str, ...] = ("主题",)
    image_language: str = "zh"
    """Names of measured image attributes (SPEC §15): the field names of image versions."""


class KeyedLine(NamedTuple):
    """An active, non-meta field line under its conflict key (SPEC §7.4). ``line`` is 1-based;
    ``path`` is relative to the evidence root.

    A named tuple rather than a frozen dataclass: a conflict check makes one per related
    source (about 16,000 on Debian's 100-citation draft) and a frozen dataclass's ``__init__``
    cost ten times as much (BENCHMARKS.md, "Debian first check"). Immutable and hashable;
    ``_replace`` makes a changed copy.
    """

    doc_id: str
    version: int
    line: int
    subject: str | None
    field: str
    value: str
    path: str

    @property
    def identity(self) -> LineIdentity:
        return (self.doc_id, self.version, self.line)

    @property
    def key(self) -> ConflictKey:
        return (self.subject, self.field)


class ValueGroup(NamedTuple):
    """The active lines of one conflict key that share one value after SPEC §7.4's rule.

    ``normalized`` is the compared form (NFKC, whitespace removed); ``spelled`` the first
    spelling in (doc_id, version, line) order; ``count`` how many lines hold it; ``sources``
    at most the requested number of them: the draft's cited lines first, then by (doc_id,
    version, line).

    A named tuple like :class:`KeyedLine`: a key summary makes one per distinct value (6,900
    for Debian's 100-citation draft), and a frozen dataclass's ``__init__`` cost several times
    as much. Immutable and hashable; ``_replace`` makes a changed copy. The field ``count``
    hides the tuple method of that name (nothing counts a group's items).
    """

    normalized: str
    spelled: str
    count: int  # type: ignore[assignment]  # the field hides tuple.count (see the docstring)
    sources: Sequence[KeyedLine]


@dataclass(frozen=True, slots=True)
class KeySummary:
    """What the conflict gate reads of one key (SPEC §7.4): every value with its count.

    ``total_lines`` is the number of distinct active lines with this key (their sum over the
    checked keys is ``same_key_sources_checked``; keys never share a line). ``values`` are in
    order of their first source (doc_id, version, line).
    """

    key: ConflictKey
    total_lines: int
    values: tuple[ValueGroup, ...]

    @property
    def conflicting(self) -> bool:
        """Two or more distinct values: a ``field-conflict`` (GR108); no side is picked."""
        return len(self.values) >= 2


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One full-text hit: a line of a document's active version (1-based), best first;
    ``text`` is the line after Unicode NFKC (what the search compared).
    ``rank`` is bm25-like: lower is better.
    """

    doc_id: str
    version: int
    line: int
    text: str
    rank: float


@dataclass(frozen=True, slots=True)
class VocabularyTerm:
    """A known term of the closed question grammar (SPEC §13, §15) found in a text.

    ``text`` is the term in NFKC form as it occurs in the (NFKC) text; ``kind`` is
    ``"subject"``, ``"field"`` or ``"measured"`` (an image value, SPEC §12); ``names`` are the
    spellings the index holds that normalise to ``text`` (a subject or field name as written).
    """

    text: str
    kind: str
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IndexStats:
    """Counts for ``grounding index`` (corpus-wide)."""

    documents: int
    versions: int
    active_documents: int
    active_lines: int
    active_field_lines: int


class IndexSnapshot(ABC):
    """The index as of ``replay(seq)``; see the module docstring for the rules.

    Subclasses implement the abstract lookups; the concrete methods here are defined in
    terms of them and may be overridden with faster equivalents.
    """

    seq: int
    """The number of events this snapshot reflects (``replay(seq)``)."""
    generation: int
    """Changes whenever answers may change (new events, rebuilt derived data, new settings)."""
    settings: ParseSettings

    # -- versions ----------------------------------------------------------------------------

    @abstractmethod
    def versions(self, doc_id: str) -> Mapping[int, VersionRecord]:
        """Version number -> record of every known version of ``doc_id`` (empty if unknown)."""

    def newest(self, doc_id: str) -> VersionRecord | None:
        """The newest known version (SPEC §3: only it can be active), revoked or not."""
        versions = self.versions(doc_id)
        return versions[max(versions)] if versions else None

    def record(self, doc_id: str, version: int) -> VersionRecord | None:
        return self.versions(doc_id).get(version)

    @abstractmethod
    def document(self, record: VersionRecord) -> EvidenceDocument:
        """The parsed text of ``record``'s content (read on demand; cached in a bounded cache)."""

    def line_text(self, record: VersionRecord, line: int, expect: str | None = None) -> str | None:
        """The text of 1-based ``line`` of ``record``'s content (SPEC §3 lines, no terminator,
        code points), or None when the content has no such line.

        ``expect`` is what the caller expects the line to be (a claim's quote): an
        implementation may use it to confirm the line without reading the whole content into
        lines (SqlSnapshot does, with a bounded cache of confirmed lines); the answer is the
        same either way. The default reads :meth:`document`. Raises ``KeyError`` like
        :meth:`document` when the content is not in the index.
        """
        lines = self.document(record).lines
        return lines[line - 1] if 0 < line <= len(lines) else None

    @abstractmethod
    def record_for_path(self, path: str) -> VersionRecord | None:
        """The version most recently imported from ``path`` (relative to the evidence root;
        the current content of each version counts), a version not deleted winning over a
        deleted one. None when nothing was imported from it.
        """

    def inactive_reason(self, record: VersionRecord, today: dt.date) -> str | None:
        """Why a version is not active (SPEC §3), or None when it is active.

        Reads only the record (its front-matter facts), never the version's text.
        """
        newest = self.newest(record.doc_id)
        if record.revoked:
            if (newest is not None and newest.version > record.version
                    and (record.reason or "").startswith(REPLACED_REASON)):
                # the file now holds a newer version: superseded, not withdrawn (tryout2)
                return f"version {newest.version} supersedes it"
            if record.reason == "deleted":
                return "it was deleted"
            if (record.reason or "").startswith(REPLACED_REASON):
                # the file holds other content now, not a newer version (e.g. a lowered or
                # reused version, refused: the file's own finding says why; tryout3)
                return f"the evidence file {record.reason[len(REPLACED_REASON):]} no longer holds it; see its findings"
            return f"it is revoked ({record.reason})"
        if newest is not None and newest.version != record.version:
            return f"version {newest.version} supersedes it"
        if record.status == "revoked":
            return "it is revoked (status: revoked)"
        if record.effective_from is not None and today < record.effective_from:
            return f"it is not effective until {record.effective_from.isoformat()}"
        if record.effective_until is not None and today > record.effective_until:
            return f"it expired on {record.effective_until.isoformat()}"
        return None

    def is_active(self, record: VersionRecord, today: dt.date) -> bool:
        return self.inactive_reason(record, today) is None

    def active_record(self, doc_id: str, today: dt.date) -> VersionRecord | None:
        """The active version of ``doc_id`` (at most one), or None."""
        newest = self.newest(doc_id)
        return newest if newest is not None and self.is_active(newest, today) else None

    def is_meta_field(self, name: str) -> bool:
        return name in self.settings.meta_fields

    def memo(self, key: Hashable, compute: Callable[[], T],
             of_summary: tuple[ConflictKey, dt.date] | None = None, doc_ids: Iterable[str] = ()) -> T:
        """``compute()``, remembered for this snapshot under ``key`` (bounded). For values that
        depend only on the snapshot and ``key`` (e.g. a conflict's message and related
        locations, rebuilt by every re-check of the same draft otherwise). ``of_summary``
        ``(key, today)``: the value depends only on that conflict key's :meth:`key_summary` on
        that day and the documents ``doc_ids``, so a later snapshot in which neither changed
        may keep it. The default does not remember.
        """
        return compute()

    @contextmanager
    def reading(self) -> Iterator[IndexSnapshot]:
        """Hold one consistent read of the store for a whole check (re-entrant).

        The SQL store answers every ``replay(n)`` from rows that later writes never change
        for ``n``, so most reads need nothing; the exception is a rebuild of the derived
        tables after a settings change, which a pinned read transaction (WAL) never sees
        half-done. The default does nothing.
        """
        yield self

    # -- documents by name -------------------------------------------------------------------

    @abstractmethod
    def doc_ids(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """Known doc_ids starting with ``prefix``, sorted by code point, at most ``limit``.

        With no limit this is corpus-wide; completion passes a limit.
        """

    def similar_doc_ids(self, doc_id: str, n: int = 1) -> list[str]:
        """Up to ``n`` known doc_ids close to ``doc_id`` (a "did you mean" hint); bounded:
        candidates share a prefix with ``doc_id``.
        """
        candidates: list[str] = []
        for cut in range(min(len(doc_id), 4), 0, -1):
            candidates = self.doc_ids(doc_id[:cut], limit=500)
            if candidates:
                break
        import difflib  # hints only (unknown doc_id, field name): loaded when one is made

        return difflib.get_close_matches(doc_id, candidates, n=n)

    # -- field lines and conflict keys -------------------------------------------------------

    @abstractmethod
    def key_lines(self, key: ConflictKey, today: dt.date) -> list[KeyedLine]:
        """Every active line of one key, in (doc_id, version, line) order (may be large)."""

    def key_summary(self, key: ConflictKey, today: dt.date, cited: Iterable[LineIdentity] = (),
                    per_value: int = 5) -> KeySummary:
        """SPEC §7.4 for one key: each distinct value (NFKC, whitespace removed) with its count
        and at most ``per_value`` sources, ``cited`` lines first.
        """
        first = set(cited)
        groups: dict[str, list[KeyedLine]] = {}
        for kl in self.key_lines(key, today):
            groups.setdefault(normalize(kl.value), []).append(kl)
        values = []
        total = 0
        for norm, lines in groups.items():
            total += len(lines)
            ordered = sorted(lines, key=lambda kl: (kl.identity not in first, kl.identity))
            values.append(ValueGroup(norm, lines[0].value, len(lines), tuple(ordered[:per_value])))
        return KeySummary(key, total, tuple(values))

    @abstractmethod
    def subjects_with_field(self, field_name: str, today: dt.date) -> list[str | None]:
        """Every subject (None first) having an active, non-meta line with this field."""

    def has_field(self, field_name: str, today: dt.date) -> bool:
        return bool(self.subjects_with_field(field_name, today))

    def field_names(self, prefix: str, today: dt.date, limit: int = 200) -> list[str]:
        """Active, non-meta field names starting with ``prefix``, sorted by code point, at
        most ``limit`` (bounded: an indexed range).
        """
        return []

    def similar_field_names(self, name: str, today: dt.date, n: int = 1) -> list[str]:
        """Up to ``n`` active field names close to ``name`` ("did you mean", SPEC §7 GR109).

        Bounded: candidates are the field names sharing ``name``'s longest shared prefix
        (up to 4 code points) and those starting with one of its first 16 two- or
        three-code-point pieces (so ``时间`` is offered for ``活动时间``); they are ranked by
        :func:`difflib.get_close_matches` (cutoff 0.5). Never reads every field name.
        """
        if not name:
            return []
        candidates: set[str] = set()
        for cut in range(min(len(name), 4), 0, -1):
            candidates.update(self.field_names(name[:cut], today))
            if candidates - {name}:
                break
        pieces = dict.fromkeys(name[i:i + k] for i in range(len(name)) for k in (2, 3)
                               if i + k <= len(name))
        for piece in list(pieces)[:16]:
            candidates.update(self.field_names(piece, today, limit=50))
        candidates.discard(name)
        import difflib

        return difflib.get_close_matches(name, sorted(candidates), n=n, cutoff=0.5)

    @abstractmethod
    def known_term_in(self, sentence: str, today: dt.date) -> str | None:
        """SPEC §7.6: the longest (then leftmost) known term occurring in ``sentence``.

        ``sentence`` is already normalised (:func:`grounding_core.text.normalize`). Known terms
        are the normalised field names and values (trailing punctuation stripped) of active,
        non-meta field lines, at least 2 code points long. Near-linear in the sentence's length.
        """

    @abstractmethod
    def lines_with_value_in(self, sentence: str, today: dt.date, limit: int = 50) -> list[KeyedLine]:
        """Active, non-meta field lines whose normalised value (SPEC §7.3, at least 2 code
        points, like the known terms of §7.6) occurs in the normalised ``sentence``, longest
        value first, then by (doc_id, version, line), at most ``limit`` (citation candidates).
        """

    def changed_keys(self, since: int, today: dt.date) -> list[ConflictKey] | None:
        """Conflict keys whose active lines may differ between ``replay(since)`` and this
        snapshot (for refreshing evidence diagnostics incrementally), or None when the
        implementation cannot tell (the caller then treats every key as changed).
        """
        return None

    @abstractmethod
    def conflicting_keys(self, today: dt.date) -> list[ConflictKey]:
        """Every key with two or more distinct values, sorted by (field, subject). Corpus-wide."""

    @abstractmethod
    def stats(self, today: dt.date) -> IndexStats:
        """Counts for ``grounding index``. Corpus-wide."""

    @abstractmethod
    def iter_active(self, today: dt.date) -> Iterator[VersionRecord]:
        """Every active version in doc_id order, streamed. Corpus-wide (benchmarks, tools)."""

    # -- full-text search --------------------------------------------------------------------

    @abstractmethod
    def search(self, query: str, limit: int = 20, any_term: bool = False) -> list[SearchHit]:
        """Full-text search over the lines of versions active at this snapshot, best first.

        Each whitespace-separated term must occur (``any_term``: at least one, ranked by how
        many of the query's trigrams a line holds). Any text is a safe query (quotes, NUL,
        FTS syntax are searched literally). At most ``limit`` hits.
        """

    @property
    def search_complete(self) -> bool:
        """False while the full-text rows are still being built (search may miss lines)."""
        return True

    # -- image evidence (SPEC §12) -----------------------------------------------------------

    def measurement(self, sha256: str) -> Measurement | None:
        """The measured regions of the image content with this sha256 (attribute names in
        Chinese; :meth:`Measurement.in_language` renames them), or None when no image with
        that content was indexed (a text version, an unknown hash). One indexed lookup: the
        index caches each content's measurement by sha256 when a scan reads it, so a check
        never decodes a PNG.
        """
        return None

    def regions_matching(self, conditions: Sequence[tuple[str, str]], today: dt.date,
                         limit: int = 50) -> list[tuple[VersionRecord, int, str]]:
        """Regions of active images whose measured attributes hold every ``(field, value)`` of
        ``conditions`` (names in the index's image language, values verbatim), as
        ``(version record, region number, conflict-key subject SUBJECT#rN)`` sorted by
        (doc_id, version, region), at most ``limit`` (SPEC §13 measured questions). An
        indexed lookup on (field, value); an implementation without image evidence finds none.
        """
        return []

    # -- the closed question grammar (SPEC §13, §15) ----------------------------------------

    @abstractmethod
    def vocabulary_in(self, text: str, today: dt.date) -> list[VocabularyTerm]:
        """Every known subject and field name (NFKC) occurring in ``text`` (already NFKC).

        Known: the subjects and field names of active, non-meta field lines (SPEC §15: not
        text values). Each distinct (term, kind) once, in no particular order; a name that is
        both a subject and a field comes twice. Near-linear in the length of ``text`` (the
        spirit of :meth:`known_term_in`): never loads every name into Python per call.
        """

    # -- memory entries (SPEC §11) ----------------------------------------------------------

    @abstractmethod
    def memory_versions(self, scope: str, key: str) -> Mapping[int, MemoryEntry]:
        """Version -> entry of every version of ``(scope, key)`` remembered by this snapshot's
        seq (empty when unknown), with approvals and forgets after the seq hidden. One
        indexed lookup; a key has as many versions as writers made.
        """

    @abstractmethod
    def memory_scopes(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """Scopes with at least one entry, starting with ``prefix``, sorted by code point, at
        most ``limit`` (completion passes a limit; without one it is corpus-wide).
        """

    @abstractmethod
    def memory_keys(self, scope: str, prefix: str = "", limit: int | None = None) -> list[str]:
        """Keys of ``scope`` with at least one entry, starting with ``prefix``, sorted, at most
        ``limit``.
        """

    def memory_active(self, scope: str, key: str) -> MemoryEntry | None:
        """The active entry of a key: its newest approved, unforgotten version (SPEC §11)."""
        return active_of(self.memory_versions(scope, key))

    def memory_entry(self, scope: str, key: str, version: int) -> MemoryEntry | None:
        return self.memory_versions(scope, key).get(version)


class EmptySnapshot(EmptyMemory, IndexSnapshot):
    """``replay(0)`` of any store: no documents (before a workspace is open), no memory
    (:class:`~grounding_core.memory.EmptyMemory`'s methods, first in the MRO).
    """

    def __init__(self, settings: ParseSettings | None = None) -> None:
        self.seq = 0
        self.generation = 0
        self.settings = settings or ParseSettings()

    def versions(self, doc_id: str) -> Mapping[int, VersionRecord]:
        return {}

    def document(self, record: VersionRecord) -> EvidenceDocument:
        raise KeyError(f"{record.doc_id}@{record.version} is not in an empty index")

    def record_for_path(self, path: str) -> VersionRecord | None:
        return None

    def doc_ids(self, prefix: str = "", limit: int | None = None) -> list[str]:
        return []

    def key_lines(self, key: ConflictKey, today: dt.date) -> list[KeyedLine]:
        return []

    def subjects_with_field(self, field_name: str, today: dt.date) -> list[str | None]:
        return []

    def similar_field_names(self, name: str, today: dt.date, n: int = 1) -> list[str]:
        return []

    def known_term_in(self, sentence: str, today: dt.date) -> str | None:
        return None

    def lines_with_value_in(self, sentence: str, today: dt.date, limit: int = 50) -> list[KeyedLine]:
        return []

    def conflicting_keys(self, today: dt.date) -> list[ConflictKey]:
        return []

    def stats(self, today: dt.date) -> IndexStats:
        return IndexStats(0, 0, 0, 0, 0)

    def iter_active(self, today: dt.date) -> Iterator[VersionRecord]:
        return iter(())

    def search(self, query: str, limit: int = 20, any_term: bool = False) -> list[SearchHit]:
        return []

    def vocabulary_in(self, text: str, today: dt.date) -> list[VocabularyTerm]:
        return []


def keyed_lines_of(doc: EvidenceDocument, record: VersionRecord, settings: ParseSettings) -> list[KeyedLine]:
    """The non-meta field lines of one version, in line order (SPEC §3 field lines); an image's
    attributes under their region's subject ``SUBJECT#rN`` (SPEC §12).
    """
    meta = settings.meta_fields
    if isinstance(doc, ImageDocument):
        return [KeyedLine(record.doc_id, record.version, number, doc.line_subject(number), fl.field, fl.value,
                          record.path) for number, fl in doc.field_lines.items()]
    return [KeyedLine(record.doc_id, record.version, number, doc.subject, fl.field, fl.value, record.path)
            for number, fl in doc.field_lines.items() if fl.field not in meta]


def longest_term_in(sentence: str, terms: Iterable[str]) -> str | None:
    """The longest (then leftmost) of ``terms`` occurring in ``sentence``; helper for
    implementations that fetched candidate terms. Linear per candidate (``str.__contains__``).
    """
    best: tuple[int, int, str] | None = None
    for term in terms:
        at = sentence.find(term)
        if at < 0:
            continue
        rank = (-len(term), at, term)
        if best is None or rank < best:
            best = rank
    return best[2] if best is not None else None


def value_term(value: str) -> str:
    """The normalised form of a value used by SPEC §7.3 and §7.6."""
    return normalize_value(value)


__all__: Sequence[str] = (
    "ConflictKey", "EmptySnapshot", "IndexSnapshot", "IndexStats", "KeySummary", "KeyedLine", "LineIdentity",
    "ParseSettings", "SearchHit", "ValueGroup", "VersionRecord", "VocabularyTerm", "keyed_lines_of",
    "longest_term_in",
)
