"""Findings shown on evidence files themselves (SPEC §3, §4, §7.4, §10).

An evidence file's findings are the scan's own (``unreadable-evidence``, ``duplicate-doc-id``,
``version-reuse``, ``invalid-front-matter``) plus one ``field-conflict`` (GR108) on each of its
active field lines whose conflict key has two or more distinct values. Everything is read
from one :class:`~grounding_core.index.IndexSnapshot`; nothing here keeps state between calls
except the per-refresh :class:`ConflictCache` the caller owns.

Related information of an evidence conflict (SPEC §7.4 caps the draft side at 5 sources per
value; the evidence side follows it): the *other* values' sources first, then the line's own
value's, at most :data:`PER_VALUE` per value in (doc_id, version, line) order, the line itself
left out, and at most :data:`MAX_RELATED` in all, so a key shared by 17,000 lines still gives
small diagnostics. Each related location carries its line's text (``Location.line_text``), so
converting it to an editor range reads no file.

Cost: a refresh after a change reads what the change touches — :func:`affected_paths` names
the files whose findings may differ between two snapshots (the files re-read, and the files
holding lines of a conflict key a touched document has or had); :func:`file_findings`
recomputes one file from its own keys. Only :func:`conflict_paths` is corpus-wide (the first
refresh of a session, or after a settings change).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .conflicts import source_id
from .images import ImageDocument, is_image_path
from .index import ConflictKey, IndexSnapshot, KeyedLine, KeySummary, LineIdentity, VersionRecord, keyed_lines_of
from .model import Finding, Location, Span
from .text import normalize, shorten

PER_VALUE = 5
"""Related sources listed per distinct value (SPEC §7.4)."""
MAX_RELATED = 5
"""Related sources listed on one evidence conflict diagnostic in all: each line of a key shared
by thousands of lines gets one, so a few sources that disagree with it (then sources that
agree) say enough; the draft's finding and ``grounding conflicts`` list more."""
MAX_VALUES_NAMED = 6
"""Distinct values named in one conflict message; the rest are counted."""
CONFLICT_HINT = "Correct or revoke one of the sources; Grounding never picks a side."


class KeyConflict:
    """One conflicting key as evidence findings need it: the message (made once per key) and,
    per distinct value, the related locations its lines show (made once per value).
    """

    def __init__(self, snapshot: IndexSnapshot, summary: KeySummary, display: Callable[[str], str]) -> None:
        self.summary = summary
        self.message = conflict_message(summary)
        self._snapshot = snapshot
        self._display = display
        self._groups = {group.normalized: group for group in summary.values}
        self._by_value: dict[str, tuple[tuple[Location, ...], tuple[tuple[LineIdentity, Location], ...]]] = {}
        self._texts: dict[tuple[str, int], tuple[str, ...]] = {}

    def related(self, line: KeyedLine, value: str) -> tuple[Location, ...]:
        """The related locations of ``line`` (normalised value ``value``): the other values'
        sources first, at most :data:`PER_VALUE` per value, :data:`MAX_RELATED` in all, never
        the line itself.
        """
        made = self._by_value.get(value)
        if made is None:
            others: list[Location] = []
            for group in self.summary.values:
                if group.normalized == value:
                    continue
                others.extend(self._location(kl) for kl in group.sources[:min(PER_VALUE, MAX_RELATED - len(others))])
                if len(others) == MAX_RELATED:
                    break
            own = self._groups[value].sources[:PER_VALUE + 1] if value in self._groups else ()
            made = self._by_value[value] = (tuple(others), tuple((kl.identity, self._location(kl)) for kl in own))
        others_made, own_made = made
        room = min(PER_VALUE, MAX_RELATED - len(others_made))
        mine = [loc for identity, loc in own_made if identity != line.identity][:room]
        return others_made + tuple(mine)

    def _location(self, kl: KeyedLine) -> Location:
        if is_image_path(kl.path):  # an image attribute: the file's first line, the region named
            return Location(self._display(kl.path), 1, f"{source_id(kl)} {kl.field}：{kl.value}", "")
        lines = self._texts.get((kl.doc_id, kl.version))
        if lines is None:
            record = self._snapshot.record(kl.doc_id, kl.version)
            lines = tuple(self._snapshot.document(record).lines) if record is not None else ()
            self._texts[(kl.doc_id, kl.version)] = lines
        text = lines[kl.line - 1] if 0 < kl.line <= len(lines) else ""
        return Location(self._display(kl.path), kl.line, f"{kl.field}：{kl.value}", text)


@dataclass
class ConflictCache:
    """Key -> :class:`KeyConflict` (None: the key does not conflict), filled during one
    refresh against one snapshot and then dropped; bounded by the keys that refresh reads.
    """

    snapshot: IndexSnapshot
    today: dt.date
    display: Callable[[str], str]
    """An evidence path (relative to the evidence root) as shown to a user (relative to the
    workspace root)."""
    keys: dict[ConflictKey, KeyConflict | None] = field(default_factory=dict)
    conflicting: frozenset[ConflictKey] | None = None
    """Every key that conflicts in :attr:`snapshot` at :attr:`today`, when the caller knows
    them (:func:`conflict_paths` lists them for a full refresh): any other key is answered
    None without reading its summary. A full refresh looks at every key of every file with a
    conflict (about 20 keys per file, 99 % of them not conflicting), and one summary query per
    key was 35 s of CPU at 10,000 files."""

    def conflict(self, key: ConflictKey) -> KeyConflict | None:
        if key not in self.keys:
            if self.conflicting is not None and key not in self.conflicting:
                return None  # not stored: the set answers it again at no cost
            summary = self.snapshot.key_summary(key, self.today, per_value=PER_VALUE + 1)
            self.keys[key] = KeyConflict(self.snapshot, summary, self.display) if summary.conflicting else None
        return self.keys[key]


def conflict_message(summary: KeySummary) -> str:
    """One sentence naming the values of a conflicting key with their counts of sources.

    At most :data:`MAX_VALUES_NAMED` values are named (each shortened to 80 code points),
    then how many more there are; the related information names the sources.
    """
    parts = []
    for group in summary.values[:MAX_VALUES_NAMED]:
        noun = "source" if group.count == 1 else "sources"
        parts.append(f"'{shorten(group.spelled)}' ({group.count} {noun})")
    more = len(summary.values) - MAX_VALUES_NAMED
    if more > 0:
        parts.append(f"{more} more value{'' if more == 1 else 's'}")
    subject, name = summary.key
    where = f" for subject '{shorten(subject)}'" if subject is not None else ""
    return f"active sources disagree on '{shorten(name)}'{where}: " + " vs ".join(parts)


PAUSE_EVERY = 128
"""Field lines between two calls of a caller's ``pause`` (a file of Debian's copyright
corpus has 4,647 conflicting lines: 134 ms of CPU in one stretch without them)."""


def conflict_findings(record: VersionRecord, cache: ConflictCache,
                      pause: Callable[[], object] | None = None) -> list[Finding]:
    """``field-conflict`` findings on the conflicting lines of one version (spans in its text).

    Only an active version has lines in conflict keys; for any other version the list is empty.
    ``pause`` (a background caller's yield point) is called every :data:`PAUSE_EVERY` lines.
    """
    snapshot, today = cache.snapshot, cache.today
    if not snapshot.is_active(record, today):
        return []
    doc = snapshot.document(record)
    out: list[Finding] = []
    for at, kl in enumerate(keyed_lines_of(doc, record, snapshot.settings)):
        if pause is not None and at and at % PAUSE_EVERY == 0:
            pause()
        conflict = cache.conflict(kl.key)
        if conflict is None:
            continue
        if isinstance(doc, ImageDocument):  # an image has no text lines: on its first, naming the region
            region = kl.subject.rpartition("#")[2] if kl.subject else ""
            out.append(Finding("field-conflict", Span(0, 0, 0, 0),
                               f"{region} {kl.field}：{kl.value}: {conflict.message}", hint=CONFLICT_HINT,
                               related=conflict.related(kl, normalize(kl.value))))
            continue
        text = doc.lines[kl.line - 1]
        out.append(Finding("field-conflict", Span.line(kl.line - 1, 0, len(text)), conflict.message,
                           hint=CONFLICT_HINT, related=conflict.related(kl, normalize(kl.value))))
    return out


def file_findings(path: str, scan_findings: Iterable[Finding], cache: ConflictCache,
                  record: VersionRecord | None = None,
                  pause: Callable[[], object] | None = None) -> tuple[Finding, ...]:
    """Every finding of the evidence file ``path`` (relative to the evidence root): the
    scan's findings, then its conflicting lines in line order.

    ``record`` is the version imported from ``path`` when the caller knows it (else it is
    looked up with ``record_for_path``). ``pause``: see :func:`conflict_findings`.
    """
    out = list(scan_findings)
    if record is None or record.path != path:
        record = cache.snapshot.record_for_path(path)
    if record is not None:
        out.extend(conflict_findings(record, cache, pause))
    return tuple(out)


def affected_paths(before: IndexSnapshot | None, after: IndexSnapshot, doc_ids: Iterable[str],
                   today: dt.date) -> dict[str, VersionRecord | None]:
    """Files whose conflict findings may differ between ``before`` and ``after``, given the
    documents whose events lie between them (``doc_ids``).

    The changed conflict keys are ``after.changed_keys(before.seq)`` when the snapshot can
    tell, else the keys of each touched document's active version in either snapshot; every
    file holding an active line of such a key that conflicts in either snapshot is affected
    (the message counts every source). Returns path -> its version in ``after`` when known.
    Reads the touched documents and those keys' lines only.
    """
    keys: set[ConflictKey] = set()
    changed = after.changed_keys(before.seq, today) if before is not None else None
    if changed is not None:
        keys.update(changed)
    for doc_id in set(doc_ids) if changed is None else ():
        for snap in (before, after):
            if snap is None:
                continue
            record = snap.active_record(doc_id, today)
            if record is not None:
                keys.update(kl.key for kl in keyed_lines_of(snap.document(record), record, snap.settings))
    out: dict[str, VersionRecord | None] = {}
    for key in keys:
        for snap in (after, before):
            if snap is None:
                continue
            if not snap.key_summary(key, today, per_value=0).conflicting:
                continue
            for kl in snap.key_lines(key, today):
                if kl.path not in out or out[kl.path] is None:
                    out[kl.path] = after.record(kl.doc_id, kl.version) if snap is after else None
    return out


def conflict_paths(snapshot: IndexSnapshot, today: dt.date,
                   keys: Iterable[ConflictKey] | None = None) -> dict[str, VersionRecord | None]:
    """Every file holding a line of a conflicting key, with its version. Corpus-wide.

    ``keys``: the conflicting keys when the caller already has them
    (``snapshot.conflicting_keys(today)``, which this otherwise reads).
    """
    out: dict[str, VersionRecord | None] = {}
    for key in snapshot.conflicting_keys(today) if keys is None else keys:
        for kl in snapshot.key_lines(key, today):
            if kl.path not in out:
                out[kl.path] = snapshot.record(kl.doc_id, kl.version)
    return out


__all__ = ["CONFLICT_HINT", "MAX_RELATED", "PER_VALUE", "ConflictCache", "KeyConflict", "affected_paths",
           "conflict_findings", "conflict_message", "conflict_paths", "file_findings"]
