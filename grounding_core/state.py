"""The index state: what ``replay(n)`` of the event log yields (SPEC §3 "Active", §4).

An :class:`IndexState` is immutable once built: applying events returns a new state, so the
server can hand a state to background work while the indexer builds the next one. Parsing of
version texts is lazy and shared through a cache keyed by content, owned by the store.

Lines are 1-based; versions and sequence numbers are positive integers.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .events import REPLACED_REASON, Event
from .evidence import EvidenceDocument, EvidenceError, FrontMatter, parse_evidence_text
from .index import (
    ConflictKey,
    IndexSnapshot,
    IndexStats,
    KeyedLine,
    ParseSettings,
    SearchHit,
    VocabularyTerm,
)
from .index import VersionRecord as IndexRecord
from .memory import EntriesMemory, MemoryEntry, MemoryEvent, MemorySource, apply_events
from .text import normalize, normalize_value, split_lines


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """The state of one (doc_id, version). ``previous_shas`` lists contents it held before
    (a declared version whose content changed: ``version-reuse``).
    """

    doc_id: str
    version: int
    sha256: str
    path: str
    text: str
    declared: bool
    revoked: bool = False
    reason: str = ""
    seq: int = 0
    previous_shas: tuple[str, ...] = ()
    content_id: int = 0
    """The seq of the import that brought this content (``seq`` also moves on a revoke)."""


@dataclass
class ParseCache:
    """Parsed documents keyed by (doc_id, sha256); shared by the states of one store."""

    settings: ParseSettings
    docs: dict[tuple[str, str, str], EvidenceDocument] = field(default_factory=dict)


class IndexState:
    """All versions of all documents after ``seq`` events (SPEC §4 ``replay(seq)``)."""

    def __init__(
        self,
        versions: dict[str, dict[int, VersionRecord]] | None = None,
        seq: int = 0,
        cache: ParseCache | None = None,
        base: tuple[IndexState, frozenset[str]] | None = None,
        memory: dict[tuple[str, str, int], MemoryEntry] | None = None,
    ) -> None:
        self._versions: dict[str, dict[int, VersionRecord]] = versions or {}
        self.seq = seq
        self.cache = cache or ParseCache(ParseSettings())
        self._memory = memory or {}
        """Memory entries after the memory events so far (SPEC §11), by (scope, key, version)."""
        self._keyed: dict[dt.date, dict[tuple[str | None, str], list[KeyedLine]]] = {}
        self._terms: dict[dt.date, tuple[frozenset[str], int]] = {}
        # Incremental upkeep of the derived indexes below (speed only, same results): the
        # state this one was applied to and the doc_ids its events touched (dropped once
        # keyed_lines is built, so no chain of old states stays alive); per date, the lines
        # of each doc_id, how many lines carry each known term, and for patching the terms,
        # the base state's counts and terms plus the lines the keyed patch removed and added.
        self._base = base
        self._by_doc: dict[dt.date, dict[str, tuple[KeyedLine, ...]]] = {}
        self._term_counts: dict[dt.date, _TermCounts] = {}
        self._fields: dict[dt.date, dict[str, frozenset[str | None]]] = {}
        self._fields_base: dict[dt.date, tuple[dict[str, frozenset[str | None]],
                                               set[tuple[str | None, str]]]] = {}
        self._terms_base: dict[dt.date, tuple[_TermCounts, int, list[KeyedLine],
                                              list[KeyedLine]]] = {}
        self._vocab: dict[dt.date, tuple[dict[str, tuple[VocabularyTerm, ...]], int]] = {}

    @property
    def settings(self) -> ParseSettings:
        return self.cache.settings

    # -- building ---------------------------------------------------------------------------

    def apply(self, events: Iterable[Event]) -> IndexState:
        """A new state with ``events`` applied in order; this state is unchanged."""
        versions = dict(self._versions)
        copied: set[str] = set()
        seq = self.seq
        memory: dict[tuple[str, str, int], MemoryEntry] | None = None
        for event in events:
            seq = max(seq, event.seq)
            if event.kind not in ("import", "revoke"):  # a memory event (SPEC §11)
                if memory is None:
                    memory = dict(self._memory)
                apply_events(memory, [MemoryEvent.from_row(event.seq, event.kind, event.version, event.data,
                                                           event.recorded_at)])
                continue
            if event.doc_id not in copied:
                versions[event.doc_id] = dict(versions.get(event.doc_id, {}))
                copied.add(event.doc_id)
            doc = versions[event.doc_id]
            old = doc.get(event.version)
            if event.kind == "import":
                previous: tuple[str, ...] = ()
                if old is not None:
                    previous = old.previous_shas
                    if old.sha256 != event.sha256 and old.sha256 not in previous:
                        previous = (*previous, old.sha256)
                doc[event.version] = VersionRecord(
                    doc_id=event.doc_id, version=event.version, sha256=event.sha256,
                    path=event.path, text=event.text, declared=event.declared,
                    seq=event.seq, previous_shas=previous, content_id=event.seq,
                )
            elif old is not None:
                doc[event.version] = replace(old, revoked=True, reason=event.reason, seq=event.seq)
        base = (self, frozenset(copied)) if self._by_doc else None
        return IndexState(versions, seq, self.cache, base, self._memory if memory is None else memory)

    def memory_view(self) -> MemorySource:
        """Memory entries as of this state's :attr:`seq` (SPEC §11 ``replay(n)``)."""
        return EntriesMemory(self._memory)

    # -- lookups ----------------------------------------------------------------------------

    def doc_ids(self) -> list[str]:
        return sorted(self._versions)

    def versions(self, doc_id: str) -> dict[int, VersionRecord]:
        """Version number -> record, possibly empty."""
        return self._versions.get(doc_id, {})

    def newest(self, doc_id: str) -> VersionRecord | None:
        """The newest known version (SPEC §3: only it can be active), revoked or not."""
        versions = self._versions.get(doc_id)
        if not versions:
            return None
        return versions[max(versions)]

    def record(self, doc_id: str, version: int) -> VersionRecord | None:
        return self._versions.get(doc_id, {}).get(version)

    def document(self, record: VersionRecord) -> EvidenceDocument:
        """The parsed text of a version (cached by content)."""
        key = (record.doc_id, record.sha256, record.path)
        doc = self.cache.docs.get(key)
        if doc is None:
            settings = self.settings
            try:
                doc = parse_evidence_text(
                    record.path, record.text, record.sha256, settings.separators,
                    settings.subject_fields,
                )
            except EvidenceError:
                # Imported text always parsed once; a settings change cannot break front
                # matter, but stay total: treat it as a body-only document.
                doc = EvidenceDocument(
                    path=record.path, sha256=record.sha256, text=record.text,
                    lines=tuple(split_lines(record.text)), front=FrontMatter(),
                    doc_id=record.doc_id, separators=settings.separators,
                )
            self.cache.docs[key] = doc
        return doc

    def inactive_reason(self, record: VersionRecord, today: dt.date) -> str | None:
        """Why a version is not active (SPEC §3), or None when it is active."""
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
        front = self.document(record).front
        if front.status == "revoked":
            return "it is revoked (status: revoked)"
        if front.effective_from is not None and today < front.effective_from:
            return f"it is not effective until {front.effective_from.isoformat()}"
        if front.effective_until is not None and today > front.effective_until:
            return f"it expired on {front.effective_until.isoformat()}"
        return None

    def is_active(self, record: VersionRecord, today: dt.date) -> bool:
        return self.inactive_reason(record, today) is None

    def active_records(self, today: dt.date) -> Iterator[VersionRecord]:
        """Every active version (at most one per doc_id), in doc_id order."""
        for doc_id in sorted(self._versions):
            newest = self.newest(doc_id)
            if newest is not None and self.is_active(newest, today):
                yield newest

    def is_meta_field(self, name: str) -> bool:
        return name in self.settings.meta_fields

    # -- derived indexes --------------------------------------------------------------------

    def keyed_lines(self, today: dt.date) -> dict[tuple[str | None, str], list[KeyedLine]]:
        """Active, non-meta field lines grouped by conflict key ``(subject, field)`` (§7.4).

        Each list is in (doc_id, line) order; the order of the keys is unspecified. Built once
        per state and date; a state made by :meth:`apply` from one that has it built patches
        a copy (only the doc_ids its events touched are re-read) instead of rebuilding.
        """
        cached = self._keyed.get(today)
        if cached is not None:
            return cached
        base = self._base
        old_by_doc = base[0]._by_doc.get(today) if base is not None else None
        if base is not None and old_by_doc is not None and 4 * len(base[1]) <= len(old_by_doc):
            keyed = self._patch_keyed(base[0], old_by_doc, base[1], today)
        else:
            by_doc = {record.doc_id: self._lines_of(record)
                      for record in self.active_records(today)}
            keyed = {}
            for lines in by_doc.values():
                for kl in lines:
                    keyed.setdefault((kl.subject, kl.field), []).append(kl)
            self._by_doc[today] = by_doc
        self._keyed[today] = keyed
        self._base = None
        return keyed

    def _lines_of(self, record: VersionRecord) -> tuple[KeyedLine, ...]:
        """The non-meta field lines of one (active) version, in line order."""
        doc = self.document(record)
        meta = self.settings.meta_fields
        doc_id, version, subject, path = record.doc_id, record.version, doc.subject, record.path
        return tuple([
            KeyedLine(doc_id, version, number, subject, fl.field, fl.value, path)
            for number, fl in doc.field_lines.items() if fl.field not in meta
        ])

    def _patch_keyed(
        self,
        base: IndexState,
        old_by_doc: dict[str, tuple[KeyedLine, ...]],
        touched: frozenset[str],
        today: dt.date,
    ) -> dict[tuple[str | None, str], list[KeyedLine]]:
        """The base state's index with the lines of the ``touched`` doc_ids redone."""
        old = base.keyed_lines(today)
        by_doc = dict(old_by_doc)
        removed: list[KeyedLine] = []
        added: list[KeyedLine] = []
        for doc_id in touched:
            removed.extend(by_doc.pop(doc_id, ()))
            newest = self.newest(doc_id)
            if newest is not None and self.is_active(newest, today):
                by_doc[doc_id] = self._lines_of(newest)
                added.extend(by_doc[doc_id])
        keyed = dict(old)
        affected = {(kl.subject, kl.field) for kl in (*removed, *added)}
        for key in affected:
            lines = [kl for kl in old.get(key, ()) if kl.doc_id not in touched]
            lines.extend(kl for kl in added if (kl.subject, kl.field) == key)
            if lines:
                lines.sort(key=lambda kl: (kl.doc_id, kl.line))
                keyed[key] = lines
            else:
                keyed.pop(key, None)
        self._by_doc[today] = by_doc
        old_fields = base._fields.get(today)
        if old_fields is not None:
            self._fields_base[today] = (old_fields, affected)
        old_counts = base._term_counts.get(today)
        old_terms = base._terms.get(today)
        if old_counts is not None and old_terms is not None:
            self._terms_base[today] = (old_counts, old_terms[1], removed, added)
        return keyed

    def subjects_with_field(self, field_name: str, today: dt.date) -> list[str | None]:
        """Every subject (None included) having an active line with this field."""
        subjects = self._field_subjects(today).get(field_name, frozenset())
        return sorted(subjects, key=lambda s: (s is not None, s or ""))

    def field_names(self, today: dt.date) -> frozenset[str]:
        """Every field name of an active, non-meta field line (the fields of :meth:`keyed_lines`)."""
        return frozenset(self._field_subjects(today))

    def _field_subjects(self, today: dt.date) -> dict[str, frozenset[str | None]]:
        """Field name -> the subjects it occurs under in :meth:`keyed_lines`; built once per
        state and date (patched from the base state's like the keyed lines).
        """
        cached = self._fields.get(today)
        if cached is not None:
            return cached
        keyed = self.keyed_lines(today)
        patch = self._fields_base.pop(today, None)
        if patch is not None:
            fields = dict(patch[0])
            for subject, name in patch[1]:
                had = fields.get(name, frozenset())
                now = had | {subject} if (subject, name) in keyed else had - {subject}
                if now:
                    fields[name] = now
                else:
                    fields.pop(name, None)
        else:
            grouped: dict[str, set[str | None]] = {}
            for subject, name in keyed:
                grouped.setdefault(name, set()).add(subject)
            fields = {name: frozenset(subjects) for name, subjects in grouped.items()}
        self._fields[today] = fields
        return fields

    def vocabulary(self, today: dt.date) -> tuple[dict[str, tuple[VocabularyTerm, ...]], int]:
        """SPEC §13 vocabulary -> terms, and the longest term's length; built once per state
        and date (question grammar hook). Field names: those of :meth:`keyed_lines` (active,
        non-meta lines); subjects: those of active versions with at least one field line
        (docs/decisions.md, §13). Names in NFKC.
        """
        cached = self._vocab.get(today)
        if cached is not None:
            return cached
        spellings: dict[tuple[str, str], set[str]] = {}
        for _subject, name in self.keyed_lines(today):
            spellings.setdefault((unicodedata.normalize("NFKC", name), "field"), set()).add(name)
        for record in self.active_records(today):
            doc = self.document(record)
            if doc.subject is not None and doc.field_lines:
                spellings.setdefault((unicodedata.normalize("NFKC", doc.subject), "subject"), set()).add(doc.subject)
        terms: dict[str, list[VocabularyTerm]] = {}
        for (norm, kind), names in spellings.items():
            if norm:
                terms.setdefault(norm, []).append(VocabularyTerm(norm, kind, tuple(sorted(names))))
        result = ({t: tuple(v) for t, v in terms.items()}, max((len(t) for t in terms), default=0))
        self._vocab[today] = result
        return result

    def known_terms(self, today: dt.date) -> tuple[frozenset[str], int]:
        """SPEC §7.6: normalised field names and values (≥ 2 code points) of active lines.

        Returns the set and the longest term's length in code points. Counted per distinct
        name and value as written (each is normalised once); like :meth:`keyed_lines`,
        patched from the base state's counts when it has them.
        """
        cached = self._terms.get(today)
        if cached is not None:
            return cached
        keyed = self.keyed_lines(today)
        patch = self._terms_base.pop(today, None)
        if patch is not None:
            old, longest, removed, added = patch
            counts = _TermCounts(dict(old.fields), dict(old.values), dict(old.terms))
            recount = False
            for kl in removed:
                for term in counts.remove(kl):
                    recount |= len(term) == longest
            for kl in added:
                for term in counts.add(kl):
                    longest = max(longest, len(term))
            if recount:
                longest = max((len(t) for t in counts.terms), default=0)
        else:
            lines = [kl for group in keyed.values() for kl in group]
            counts = _TermCounts(Counter(kl.field for kl in lines),
                                 Counter(kl.value for kl in lines), {})
            for name in counts.fields:
                counts.refer(normalize(name))
            for value in counts.values:
                counts.refer(normalize_value(value))
            longest = max((len(t) for t in counts.terms), default=0)
        result = (frozenset(counts.terms), longest)
        self._term_counts[today] = counts
        self._terms[today] = result
        return result


@dataclass(slots=True)
class _TermCounts:
    """Active lines per field name and per value as written, and per normalised term the
    number of distinct names/values that normalise to it (terms under 2 code points are
    left out). Mutable only while one state builds its own copy.
    """

    fields: dict[str, int]
    values: dict[str, int]
    terms: dict[str, int]

    def refer(self, term: str, step: int = 1) -> bool:
        """Count one more (or, with ``step=-1``, one fewer) spelling of ``term``; True when
        the term appears or disappears.
        """
        if len(term) < 2:
            return False
        left = self.terms.get(term, 0) + step
        if left:
            self.terms[term] = left
        else:
            del self.terms[term]
        return left == (1 if step > 0 else 0)

    def add(self, kl: KeyedLine) -> list[str]:
        """Count a line; returns the terms that appeared."""
        out = []
        for counter, raw, norm in ((self.fields, kl.field, normalize),
                                   (self.values, kl.value, normalize_value)):
            counter[raw] = counter.get(raw, 0) + 1
            if counter[raw] == 1 and self.refer(term := norm(raw)):
                out.append(term)
        return out

    def remove(self, kl: KeyedLine) -> list[str]:
        """Uncount a line; returns the terms that disappeared."""
        out = []
        for counter, raw, norm in ((self.fields, kl.field, normalize),
                                   (self.values, kl.value, normalize_value)):
            counter[raw] -= 1
            if not counter[raw]:
                del counter[raw]
                if self.refer(term := norm(raw), -1):
                    out.append(term)
        return out


def replay(events: Sequence[Event], n: int, cache: ParseCache) -> IndexState:
    """SPEC §4 ``replay(n)``: the state after the first ``n`` events (``n`` ≥ 0)."""
    return IndexState(cache=cache).apply(events[:n])



class MemorySnapshot(IndexSnapshot):
    """The reference :class:`~grounding_core.index.IndexSnapshot`: an in-memory
    :class:`IndexState` behind the snapshot interface.

    Correct but corpus-sized (it keeps every version text in memory and builds whole-index
    structures on first use); the SQL store replaces it for real workspaces, and the
    differential tests use it as an oracle. ``search`` delegates to ``searcher`` (the store's
    full-text index of the newest versions), filtered to versions active in this state.
    """

    def __init__(self, state: IndexState, generation: int | None = None,
                 searcher: Callable[[str, int, bool], list[SearchHit]] | None = None) -> None:
        self._state = state
        self.seq = state.seq
        self.generation = state.seq if generation is None else generation
        self.settings = state.settings
        self._searcher = searcher
        self._records: dict[str, dict[int, IndexRecord]] = {}

    @property
    def state(self) -> IndexState:
        return self._state

    def versions(self, doc_id: str) -> Mapping[int, IndexRecord]:
        cached = self._records.get(doc_id)
        if cached is None:
            cached = {n: _index_record(self._state, r) for n, r in self._state.versions(doc_id).items()}
            if len(self._records) > 4096:
                self._records.clear()
            self._records[doc_id] = cached
        return cached

    def document(self, record: IndexRecord) -> EvidenceDocument:
        inner = self._state.record(record.doc_id, record.version)
        if inner is None:
            raise KeyError(f"{record.doc_id}@{record.version} is not in this snapshot")
        return self._state.document(inner)

    def record_for_path(self, path: str) -> IndexRecord | None:
        best: VersionRecord | None = None
        for doc_id in self._state.doc_ids():
            for record in self._state.versions(doc_id).values():
                if record.path != path:
                    continue
                rank = (record.reason != "deleted", record.content_id)
                if best is None or rank > (best.reason != "deleted", best.content_id):
                    best = record
        return _index_record(self._state, best) if best is not None else None

    def doc_ids(self, prefix: str = "", limit: int | None = None) -> list[str]:
        found = [d for d in self._state.doc_ids() if d.startswith(prefix)]
        return found if limit is None else found[:limit]

    def key_lines(self, key: ConflictKey, today: dt.date) -> list[KeyedLine]:
        lines = self._state.keyed_lines(today).get(key, [])
        return sorted(lines, key=lambda kl: kl.identity)

    def subjects_with_field(self, field_name: str, today: dt.date) -> list[str | None]:
        return self._state.subjects_with_field(field_name, today)

    def field_names(self, prefix: str, today: dt.date, limit: int = 200) -> list[str]:
        return [f for f in sorted(self._state.field_names(today)) if f.startswith(prefix)][:limit]

    def known_term_in(self, sentence: str, today: dt.date) -> str | None:
        terms, longest = self._state.known_terms(today)
        best: str | None = None
        size = len(sentence)
        for i in range(size):
            for j in range(min(size, i + longest), i + 1, -1):
                if best is not None and j - i <= len(best):
                    break
                if sentence[i:j] in terms:
                    best = sentence[i:j]
                    break
        return best

    def lines_with_value_in(self, sentence: str, today: dt.date, limit: int = 50) -> list[KeyedLine]:
        found = []
        for lines in self._state.keyed_lines(today).values():
            for kl in lines:
                value = normalize_value(kl.value)
                if len(value) >= 2 and value in sentence:
                    found.append((-len(value), kl.identity, kl))
        found.sort(key=lambda item: item[:2])
        return [kl for _, _, kl in found[:limit]]

    def conflicting_keys(self, today: dt.date) -> list[ConflictKey]:
        keys = []
        for key, lines in self._state.keyed_lines(today).items():
            values = {kl.value for kl in lines}
            if len(values) >= 2 and len({normalize(v) for v in values}) >= 2:
                keys.append(key)
        return sorted(keys, key=lambda k: (k[1], k[0] or ""))

    def stats(self, today: dt.date) -> IndexStats:
        docs = self._state.doc_ids()
        active = list(self._state.active_records(today))
        return IndexStats(
            documents=len(docs),
            versions=sum(len(self._state.versions(d)) for d in docs),
            active_documents=len(active),
            active_lines=sum(len(self._state.document(r).lines) for r in active),
            active_field_lines=sum(len(v) for v in self._state.keyed_lines(today).values()),
        )

    def iter_active(self, today: dt.date) -> Iterator[IndexRecord]:
        for record in self._state.active_records(today):
            yield _index_record(self._state, record)

    def vocabulary_in(self, text: str, today: dt.date) -> list[VocabularyTerm]:
        # Reference implementation: every substring up to the longest term, looked up in a
        # dict built once per state and date (corpus-sized, as this class is).
        terms, longest = self._state.vocabulary(today)
        found: dict[tuple[str, str], VocabularyTerm] = {}
        size = len(text)
        for i in range(size):
            for j in range(i + 1, min(size, i + longest) + 1):
                for term in terms.get(text[i:j], ()):
                    found.setdefault((term.text, term.kind), term)
        return list(found.values())

    def memory_versions(self, scope: str, key: str) -> Mapping[int, MemoryEntry]:
        return self._state.memory_view().memory_versions(scope, key)

    def memory_scopes(self, prefix: str = "", limit: int | None = None) -> list[str]:
        return self._state.memory_view().memory_scopes(prefix, limit)

    def memory_keys(self, scope: str, prefix: str = "", limit: int | None = None) -> list[str]:
        return self._state.memory_view().memory_keys(scope, prefix, limit)

    def search(self, query: str, limit: int = 20, any_term: bool = False) -> list[SearchHit]:
        if self._searcher is None:
            return []
        hits = self._searcher(query, limit, any_term)
        out = []
        for hit in hits:
            newest = self._state.newest(hit.doc_id)
            if newest is not None and newest.version == hit.version and not newest.revoked:
                out.append(hit)
        return out


def _index_record(state: IndexState, record: VersionRecord) -> IndexRecord:
    doc = state.document(record)
    return IndexRecord(
        doc_id=record.doc_id, version=record.version, sha256=record.sha256, path=record.path,
        declared=record.declared, content_id=record.content_id or record.seq,
        revoked=record.revoked, reason=record.reason, seq=record.seq,
        previous_shas=record.previous_shas, status=doc.front.status,
        effective_from=doc.front.effective_from, effective_until=doc.front.effective_until,
        title=doc.title, subject=doc.subject, line_count=len(doc.lines),
        first_sha256=record.previous_shas[0] if record.previous_shas else record.sha256,
        front_end=doc.front.end_line,
    )
