"""Memory claims: approved facts about a person or a team that no evidence file holds (SPEC §11).

A *memory entry* is one version of one ``(scope, key)``: ``memory:user-alice/语言@2`` holds the
value ``中文``. Entries live in the index's append-only event log, written only by an explicit,
approved act (``grounding memory add|approve|forget`` or the editor command that asks the
writer to confirm) — never from evidence text, a draft or an answer. Three events:

- ``remember(scope, key, version, value, approved_by)``: a new version (1, 2, … per
  ``(scope, key)``; a forgotten key keeps counting). Without ``approved_by`` it is a
  *proposal*, inactive until approved.
- ``approve(scope, key, version, by)``: approves that version; no new version.
- ``forget(scope, key, reason)``: every version of the key becomes inactive until a new
  ``remember``.

At a state ``replay(n)`` an entry is in one of four states (:func:`entry_status`):

- ``active``: the newest approved, unforgotten version of its key (at most one per key);
- ``proposal``: not approved (and newer than the active version, if any);
- ``superseded``: older than the active version (approved or not);
- ``forgotten``: retracted by a ``forget`` after it was remembered.

A memory claim cites an entry as itself: id ``memory:SCOPE/KEY@VERSION``, ``text`` and
``quote`` both ``KEY：VALUE`` (full-width colon), sha256 of the quote's UTF-8 bytes
(:attr:`MemoryEntry.sha256`). Markdown: ``[^1]: memory:user-alice/语言@2 sha256:HEX "语言：中文"``
(HEX a prefix of 8 to 64 digits); JSON: exactly the seven keys of
:data:`grounding_core.model.MEMORY_CLAIM_KEYS`, full hash. The checks (:func:`check_memory_claim`)
use the evidence findings' names: unknown scope, key or version GR102 ``unknown-source``, a
wrong quote or text GR103 ``quote-mismatch``, a version older than the active one GR104
``stale-citation``, a wrong hash GR105 ``hash-mismatch``, a proposal or a forgotten entry
GR106 ``inactive-source``, outside the declared context GR107 ``invisible-source``.

Visibility (SPEC §6, §15): a context unit ``memory:S`` (every active entry of scope S),
``memory:S/K`` (the active version of K) or ``memory:S/K@N`` (that version) makes entries
visible; a unit that names nothing makes nothing visible (it is not ``invalid-context``).
A ``query`` context names the scopes it may use with ``memory: [S, ...]`` inside the context
mapping; their active entries are pinned ahead of the ranked evidence units
(``grounding_core.context``).

Memory keys count as fields for ``fields``, coverage of fields and status; memory never takes
part in the evidence conflict gate (one key has one active version by construction), and D and
``same_key_sources_checked`` count evidence lines only (SPEC §15).

This module is pure: it reads memory through a :class:`MemorySource` (every
:class:`~grounding_core.index.IndexSnapshot` is one) and never opens the database; the SQLite
tables live in ``grounding_core.memory_store``.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from .model import MEMORY_CLAIM_KEYS, Claim, Edit, Finding, MemoryRef, Span
from .text import describe_difference, shorten

if TYPE_CHECKING:
    from .memory_units import MemoryContextUnit

Ref = TypeVar("Ref")
"""What a claim id parses into (:class:`~grounding_core.model.MemoryRef`, ``RegionRef``)."""

MEMORY_PREFIX = "memory:"
"""Every memory id and memory context unit starts with this (a doc_id never holds ``:``)."""

SEPARATOR = "："
"""The separator between key and value in a memory quote (U+FF1A FULLWIDTH COLON)."""

_NUMBER = r"[1-9][0-9]{0,17}"
_NAME = r"[^\s/@\"\[\]]+"
MEMORY_ID_RE = re.compile(rf"memory:(?P<scope>{_NAME})/(?P<key>{_NAME})@(?P<version>{_NUMBER})")
"""``memory:SCOPE/KEY@VERSION`` (SPEC §11); names are checked further by :func:`name_problem`."""
MEMORY_UNIT_RE = re.compile(
    rf"memory:(?P<scope>{_NAME})(?:/(?P<key>{_NAME})(?:@(?P<version>{_NUMBER}))?)?"
)
"""A memory context unit: ``memory:S``, ``memory:S/K`` or ``memory:S/K@N``."""

_FORBIDDEN = set(" /@\"[]")
EventKind = Literal["remember", "approve", "forget"]
MEMORY_EVENT_KINDS: tuple[str, ...] = ("remember", "approve", "forget")
Status = Literal["active", "proposal", "superseded", "forgotten"]


class MemoryWriteError(ValueError):
    """A memory act that cannot be written (bad name, unknown entry, nothing to forget...).

    The message says why and what to do; the CLI prints it and exits 2.
    """


# -- names and values ------------------------------------------------------------------------


def name_problem(what: str, name: str) -> str | None:
    """Why ``name`` cannot be a memory scope or key (SPEC §11), or None when it can.

    Scopes and keys are non-empty and hold no whitespace, ``/``, ``@``, ``"``, ``[``, ``]``
    or control characters; a key also holds no full-width colon ``：`` (it separates key and
    value in the quote; docs/decisions.md).
    """
    if not name:
        return f"the memory {what} is empty"
    for ch in name:
        if ch.isspace() or ch in _FORBIDDEN or unicodedata.category(ch) in ("Cc", "Cs"):
            shown = repr(ch) if not ch.isprintable() or ch.isspace() else f"'{ch}'"
            return (f"the memory {what} {shorten(name, 40, quote=True)} holds {shown}; scopes and keys"
                    " hold no whitespace, '/', '@', '\"', '[', ']' or control characters")
        if what == "key" and ch == SEPARATOR:
            return (f"the memory key {shorten(name, 40, quote=True)} holds '：', which separates the"
                    " key from the value in a memory quote")
    return None


def text_problem(what: str, text: str) -> str | None:
    """Why a value or an approver's name cannot be stored: empty, a line break or a NUL."""
    if not text.strip():
        return f"the memory {what} is empty"
    if any(ch in "\r\n\0" for ch in text):
        return f"the memory {what} must be one line of text (no line break or NUL)"
    return None


# -- entries ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One version of one memory key as of a snapshot (SPEC §11).

    ``*_seq`` are event sequence numbers (``replay(n)`` positions), ``*_at`` the UTC times the
    events were recorded (ISO 8601). Facts after the snapshot are not shown: an entry approved
    at seq 9 has ``approved_seq`` None in a snapshot at seq 8.
    """

    scope: str
    key: str
    version: int
    value: str
    remembered_seq: int
    remembered_at: str = ""
    approved_by: str | None = None
    approved_seq: int | None = None
    approved_at: str | None = None
    forgotten_seq: int | None = None
    forgotten_at: str | None = None
    forget_reason: str | None = None

    @property
    def ref(self) -> MemoryRef:
        return MemoryRef(self.scope, self.key, self.version)

    @property
    def id(self) -> str:
        """``memory:SCOPE/KEY@VERSION``."""
        return self.ref.id

    @property
    def quote(self) -> str:
        """``KEY：VALUE``: the text and quote of a claim citing this entry."""
        return f"{self.key}{SEPARATOR}{self.value}"

    @property
    def sha256(self) -> str:
        """Lowercase hex sha256 of the quote's UTF-8 bytes."""
        return hashlib.sha256(self.quote.encode("utf-8")).hexdigest()

    @property
    def approved(self) -> bool:
        return self.approved_seq is not None

    @property
    def forgotten(self) -> bool:
        return self.forgotten_seq is not None

    def at(self, seq: int) -> MemoryEntry | None:
        """The entry as ``replay(seq)`` shows it (None when it was remembered later)."""
        if self.remembered_seq > seq:
            return None
        out = self
        if out.approved_seq is not None and out.approved_seq > seq:
            out = replace(out, approved_by=None, approved_seq=None, approved_at=None)
        if out.forgotten_seq is not None and out.forgotten_seq > seq:
            out = replace(out, forgotten_seq=None, forgotten_at=None, forget_reason=None)
        return out

    def citation(self, hex_digits: int = 12) -> str:
        """A paste-ready Markdown citation: ``memory:S/K@N sha256:HEX "K：V"``."""
        return f'{self.id} sha256:{self.sha256[:hex_digits]} "{self.quote}"'


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One memory event of the log (SPEC §11), as stored in the ``events`` table.

    ``version`` is 0 for ``forget`` (it retracts every version). ``by`` is ``approved_by`` of a
    ``remember`` (None: a proposal) or the approver of an ``approve``; ``reason`` belongs to
    ``forget``.
    """

    seq: int
    kind: EventKind
    scope: str
    key: str
    version: int = 0
    value: str = ""
    by: str | None = None
    reason: str = ""
    recorded_at: str = ""

    def data(self) -> str:
        """The JSON ``data`` column of the event row (keys sorted; non-ASCII kept)."""
        obj: dict[str, Any] = {"scope": self.scope, "key": self.key}
        if self.kind == "remember":
            obj.update(value=self.value, approved_by=self.by)
        elif self.kind == "approve":
            obj["by"] = self.by
        else:
            obj["reason"] = self.reason
        return json.dumps(obj, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_row(cls, seq: int, kind: str, version: int, data: str | None, recorded_at: str) -> MemoryEvent:
        """Read an event row back; raises ValueError for a row that is not a memory event."""
        if kind not in MEMORY_EVENT_KINDS or not data:
            raise ValueError(f"event {seq} is not a memory event")
        obj = json.loads(data)
        if kind == "remember":
            return cls(seq, "remember", str(obj["scope"]), str(obj["key"]), version, str(obj["value"]),
                       obj.get("approved_by"), recorded_at=recorded_at)
        if kind == "approve":
            return cls(seq, "approve", str(obj["scope"]), str(obj["key"]), version, by=obj.get("by"),
                       recorded_at=recorded_at)
        return cls(seq, "forget", str(obj["scope"]), str(obj["key"]), 0,
                   reason=str(obj.get("reason", "")), recorded_at=recorded_at)

    def describe(self) -> str:
        """One line for logs and the history view, e.g. ``remember @2 语言：中文 (approved by 王芳)``."""
        if self.kind == "remember":
            who = f"approved by {self.by}" if self.by else "a proposal"
            return f"remember @{self.version} {self.key}{SEPARATOR}{self.value} ({who})"
        if self.kind == "approve":
            return f"approve @{self.version} by {self.by}"
        return "forget every version" + (f" ({self.reason})" if self.reason else "")


def apply_events(entries: dict[tuple[str, str, int], MemoryEntry],
                 events: Iterable[MemoryEvent]) -> None:
    """The reference semantics of the memory events (SPEC §11, §15), applied in log order.

    ``entries`` maps ``(scope, key, version)`` to the entry after the events so far and is
    updated in place. ``approve`` of an unknown, approved or forgotten version and ``forget``
    of a key with nothing left to forget change nothing (writers refuse them; a hand-made log
    stays total). ``grounding_core.memory_store`` does the same in SQL; the tests compare the two.
    """
    for e in events:
        if e.kind == "remember":
            entries.setdefault((e.scope, e.key, e.version), MemoryEntry(
                e.scope, e.key, e.version, e.value, e.seq, e.recorded_at, e.by,
                e.seq if e.by else None, e.recorded_at if e.by else None))
        elif e.kind == "approve":
            old = entries.get((e.scope, e.key, e.version))
            if old is not None and not old.approved and not old.forgotten:
                entries[(e.scope, e.key, e.version)] = replace(
                    old, approved_by=e.by, approved_seq=e.seq, approved_at=e.recorded_at)
        else:
            for ident, old in list(entries.items()):
                if ident[:2] == (e.scope, e.key) and not old.forgotten:
                    entries[ident] = replace(old, forgotten_seq=e.seq, forgotten_at=e.recorded_at,
                                             forget_reason=e.reason)


# -- reading memory --------------------------------------------------------------------------


class MemorySource(Protocol):
    """What the memory checks read (every :class:`~grounding_core.index.IndexSnapshot` is one).

    All answers are as of one state ``replay(n)``; each call is one indexed lookup.
    """

    def memory_versions(self, scope: str, key: str) -> Mapping[int, MemoryEntry]:
        """Version -> entry of every version of ``(scope, key)`` (empty when unknown)."""
        ...

    def memory_scopes(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """Scopes having at least one entry, starting with ``prefix``, sorted, at most ``limit``."""
        ...

    def memory_keys(self, scope: str, prefix: str = "", limit: int | None = None) -> list[str]:
        """Keys of ``scope`` starting with ``prefix``, sorted by code point, at most ``limit``."""
        ...


class EmptyMemory:
    """A :class:`MemorySource` with no entries (an index without a memory table)."""

    def memory_versions(self, scope: str, key: str) -> Mapping[int, MemoryEntry]:
        return {}

    def memory_scopes(self, prefix: str = "", limit: int | None = None) -> list[str]:
        return []

    def memory_keys(self, scope: str, prefix: str = "", limit: int | None = None) -> list[str]:
        return []


class EntriesMemory:
    """A :class:`MemorySource` over entries held in Python (the in-memory reference index,
    ``grounding_core.state``; corpus-sized like it, never used by the SQL store).
    """

    def __init__(self, entries: Mapping[tuple[str, str, int], MemoryEntry]) -> None:
        self._entries = entries

    def memory_versions(self, scope: str, key: str) -> Mapping[int, MemoryEntry]:
        return {v: e for (s, k, v), e in sorted(self._entries.items()) if (s, k) == (scope, key)}

    def memory_scopes(self, prefix: str = "", limit: int | None = None) -> list[str]:
        found = sorted({s for s, _, _ in self._entries if s.startswith(prefix)})
        return found if limit is None else found[:limit]

    def memory_keys(self, scope: str, prefix: str = "", limit: int | None = None) -> list[str]:
        found = sorted({k for s, k, _ in self._entries if s == scope and k.startswith(prefix)})
        return found if limit is None else found[:limit]


def source_of(state: object) -> MemorySource:
    """The memory of an index snapshot or an ``IndexState`` (hook while callers still pass
    states: an :class:`~grounding_core.index.IndexSnapshot` is returned as it is).
    """
    if hasattr(state, "memory_versions"):
        return state  # type: ignore[return-value]  # structurally a MemorySource
    view = getattr(state, "memory_view", None)
    if callable(view):
        found = view()
        if hasattr(found, "memory_versions"):
            return found  # type: ignore[no-any-return]
    return EmptyMemory()


def active_of(versions: Mapping[int, MemoryEntry]) -> MemoryEntry | None:
    """The active version: the newest approved, unforgotten one (SPEC §11), or None."""
    live = [v for v, e in versions.items() if e.approved and not e.forgotten]
    return versions[max(live)] if live else None


def entry_status(versions: Mapping[int, MemoryEntry], version: int) -> tuple[Status, str]:
    """The state of one version among its key's versions, and a sentence saying why.

    Raises KeyError when ``version`` is not among ``versions``.
    """
    entry = versions[version]
    active = active_of(versions)
    if entry.forgotten:
        why = f" ({entry.forget_reason})" if entry.forget_reason else ""
        return "forgotten", f"it was forgotten{why}"
    if active is not None and active.version == version:
        return "active", f"approved by {entry.approved_by}"
    if active is not None and version < active.version:
        return "superseded", f"version {active.version} supersedes it"
    return "proposal", ("it is a proposal, not approved yet; approve it with"
                        f" `grounding memory approve {entry.id} --by NAME`")


def scope_entries(source: MemorySource, scope: str) -> list[MemoryEntry]:
    """The active entry of every key of ``scope``, by key (SPEC §6 unit ``memory:S``)."""
    out = []
    for key in source.memory_keys(scope):
        active = active_of(source.memory_versions(scope, key))
        if active is not None:
            out.append(active)
    return out


# -- parsing ---------------------------------------------------------------------------------


def is_memory_id(text: str) -> bool:
    return text.startswith(MEMORY_PREFIX)


def parse_memory_id(text: str) -> tuple[MemoryRef | None, str]:
    """``memory:SCOPE/KEY@VERSION`` -> (ref, "") or (None, why it is malformed)."""
    shown = shorten(text, 60, quote=True)
    m = MEMORY_ID_RE.fullmatch(text)
    if m is None:
        rest = text[len(MEMORY_PREFIX):]
        if "/" not in rest:
            return None, f"{shown} is not a memory id: expected memory:SCOPE/KEY@VERSION, e.g. memory:user-alice/语言@2"
        _, _, tail = rest.partition("/")
        if "@" not in tail:
            return None, f"{shown}: a memory id ends with @VERSION (memory:SCOPE/KEY@VERSION)"
        version = tail.rpartition("@")[2]
        if len(version) > 18:
            return None, f"{shorten(text, quote=True)}: the version number is too large"
        if not re.fullmatch(r"[1-9][0-9]*", version):
            return None, (f"{shown}: the version {shorten(version, 20, quote=True)} must be a positive"
                          " integer (no leading zeros)")
        return None, f"{shown}: the scope or key is empty or holds whitespace, '/', '@', '[', ']' or '\"'"
    for what in ("scope", "key"):
        problem = name_problem(what, m[what])
        if problem is not None:
            return None, problem
    return MemoryRef(m["scope"], m["key"], int(m["version"])), ""


@dataclass(frozen=True, slots=True)
class MemoryUnitSpec:
    """A memory context unit (SPEC §6, §11): a whole scope, the active version of a key, or one
    version. ``key``/``version`` None widen it.
    """

    scope: str
    key: str | None = None
    version: int | None = None

    @property
    def id(self) -> str:
        out = f"{MEMORY_PREFIX}{self.scope}"
        if self.key is not None:
            out += f"/{self.key}"
            if self.version is not None:
                out += f"@{self.version}"
        return out


def parse_memory_unit(text: str) -> MemoryUnitSpec | None:
    """``memory:S``, ``memory:S/K`` or ``memory:S/K@N`` -> a unit; None when malformed."""
    m = MEMORY_UNIT_RE.fullmatch(text)
    if m is None or name_problem("scope", m["scope"]):
        return None
    if m["key"] is not None and name_problem("key", m["key"]):
        return None
    return MemoryUnitSpec(m["scope"], m["key"], int(m["version"]) if m["version"] else None)


def context_memory_value(value: Any) -> tuple[tuple[MemoryUnitSpec, ...], str | None]:
    """The ``memory`` key of a context mapping: a scope or a list of scopes (``user-alice`` or
    ``memory:user-alice``; ``memory:S/K`` and ``memory:S/K@N`` also work) -> units, or an error.
    """
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        return (), "context.memory must be a memory scope or a list of them, e.g. [user-alice]"
    units = []
    for item in items:
        unit = None
        if isinstance(item, str):
            unit = parse_memory_unit(item if is_memory_id(item) else MEMORY_PREFIX + item)
        if unit is None:
            return (), f"context.memory item {item!r} is not a memory scope (no whitespace, '/', '@')"
        units.append(unit)
    return tuple(units), None


def log_units(text: str) -> tuple[MemoryUnitSpec, ...]:
    """Memory units of a pipeline's context log (SPEC §6): ``{"memory": "memory:S/K@N"}`` items of
    its ``units`` list (other items are evidence units, read by ``drafts.parse_context_log``).
    Raises ValueError naming the item when one is malformed.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return ()
    units = data.get("units") if isinstance(data, dict) else None
    out = []
    for i, unit in enumerate(units if isinstance(units, list) else []):
        if isinstance(unit, dict) and "memory" in unit:
            value = unit["memory"]
            spec = parse_memory_unit(value) if isinstance(value, str) else None
            if spec is None or set(unit) != {"memory"}:
                raise ValueError(f'units[{i}] must be {{"memory": "memory:SCOPE[/KEY[@VERSION]]"}}')
            out.append(spec)
    return tuple(out)


# -- visibility ------------------------------------------------------------------------------


def memory_visible(units: Sequence[MemoryUnitSpec], entry: MemoryEntry,
                   active: MemoryEntry | None) -> bool:
    """SPEC §11 V: a unit lists the entry, the active version of its key, or its whole scope."""
    for unit in units:
        if unit.scope != entry.scope:
            continue
        if unit.key is None:
            return True
        if unit.key != entry.key:
            continue
        if unit.version is None:
            if active is not None and active.version == entry.version:
                return True
        elif unit.version == entry.version:
            return True
    return False


def resolve_units(source: MemorySource, units: Sequence[MemoryUnitSpec]) -> list[MemoryEntry]:
    """The entries a list of units makes visible, in unit order without repeats: the active
    entries of a scope, the active version of a key, or the named version (any state). A unit
    that names nothing contributes nothing.
    """
    out: dict[tuple[str, str, int], MemoryEntry] = {}
    for unit in units:
        if unit.key is None:
            found = scope_entries(source, unit.scope)
        else:
            versions = source.memory_versions(unit.scope, unit.key)
            one = active_of(versions) if unit.version is None else versions.get(unit.version)
            found = [one] if one is not None else []
        for entry in found:
            out.setdefault((entry.scope, entry.key, entry.version), entry)
    return list(out.values())


# -- checks (SPEC §11 P and V) ---------------------------------------------------------------


@dataclass
class MemoryCheck:
    """The outcome of checking one memory claim: ``supported`` is P, ``valid`` is P and V.

    ``entry`` is the cited entry when scope, key and version exist (valid or not).
    """

    entry: MemoryEntry | None = None
    supported: bool = False
    valid: bool = False


def check_memory_claim(claim: Claim, source: MemorySource, units: Sequence[MemoryUnitSpec] | None,
                       findings: list[Finding],
                       left_out: Callable[[str, int, int], str | None] | None = None) -> MemoryCheck:
    """SPEC §11 P and V for one memory claim; appends findings (evidence names) to ``findings``.

    ``units`` is the declared context's memory units, or None when the draft declares no
    context (visibility is then not checked). ``left_out(doc_id, version, line)`` says why a
    compiled query context's unit was not kept (``Visibility.why_left_out``; memory units
    are ``memory:SCOPE/KEY``, line 1). Spans follow SPEC §7.7: the definition from its ID to
    the line's end, or in a JSON answer the offending value.
    """
    ref = claim.memory
    assert ref is not None
    out = MemoryCheck()
    cid = ref.id
    is_json = claim.json_text is not None

    def add(name: str, message: str, hint: str = "", key: str | None = None,
            fix: Edit | None = None) -> None:
        at = claim.value_span(key) if is_json and key else claim.citation_span
        findings.append(Finding(name, at, message, hint=hint, citation=cid, fix=fix))

    versions = source.memory_versions(ref.scope, ref.key)
    if not versions:
        import difflib  # only for this hint: a check citing no unknown memory never loads it

        keys = source.memory_keys(ref.scope, limit=500)
        if not keys:
            close = difflib.get_close_matches(ref.scope, source.memory_scopes(ref.scope[:1], limit=500), n=1,
                                              cutoff=0.5)
            add("unknown-source", f"no memory scope '{shorten(ref.scope)}' exists",
                hint=f"Did you mean 'memory:{close[0]}'?" if close else
                "Memory entries are written with `grounding memory add --scope S --key K --value V`.",
                key="scope")
        else:
            close = difflib.get_close_matches(ref.key, keys, n=1, cutoff=0.5)
            add("unknown-source", f"memory scope '{shorten(ref.scope)}' has no key '{shorten(ref.key)}'",
                hint=f"Did you mean '{close[0]}'?" if close else f"Its keys: {', '.join(keys[:8])}.",
                key="key")
        return out
    newest = max(versions)
    if ref.version > newest:
        add("unknown-source", f"memory:{ref.scope}/{ref.key} has no version {ref.version}; the newest is {newest}",
            hint=f"Cite memory:{ref.scope}/{ref.key}@{newest}.", key="version")
        return out
    entry = versions[ref.version]
    out.entry = entry
    active = active_of(versions)
    supported = True
    status, why = entry_status(versions, ref.version)
    if active is not None and ref.version < active.version:
        supported = False
        fix = None
        if active.value == entry.value and not is_json and claim.citation_span.end_col:
            fix = Edit(claim.citation_span, active.citation(), f"Re-anchor to {active.id}")
        add("stale-citation", f"{cid} cites version {ref.version}, but version {active.version} of"
            f" memory:{ref.scope}/{ref.key} is current ('{shorten(active.quote)}')",
            hint=f"Re-anchor to {active.id}, which holds the same value." if fix else
            f"The value changed: re-read {active.id} and restate the claim.", fix=fix)
    elif status != "active":
        supported = False
        add("inactive-source", f"{cid} is not active: {why}",
            hint="Approve the entry, or cite the active version; forgotten entries and proposals"
            " never support an answer." if status == "proposal" else
            "Cite an active memory entry instead; forgotten entries never support an answer.")
    hex_text = claim.hash_prefix or ""
    if not entry.sha256.startswith(hex_text) or (claim.json_sha256 is not None and entry.sha256 != hex_text):
        supported = False
        add("hash-mismatch", f"sha256:{hex_text[:12]} is not the hash of {cid}'s quote; it starts"
            f" {entry.sha256[:12]}", hint=f"Use sha256:{entry.sha256[:12]}." if not is_json else
            f"Use the full sha256 {entry.sha256}.", key="sha256")
    quote = claim.quote or ""
    if quote != entry.quote:
        supported = False
        detail = describe_difference(entry.quote, quote)
        add("quote-mismatch", f"the quote is not {cid} verbatim ('{shorten(entry.quote)}')"
            + (f": {detail}" if detail else ""),
            hint=f"Quote it exactly: \"{shorten(entry.quote)}\" (KEY：VALUE, full-width colon).",
            key="quote")
    if is_json and claim.json_text != quote:
        supported = False
        detail = describe_difference(quote, claim.json_text or "")
        add("quote-mismatch", "text is not the quote: a memory claim's text and quote are both KEY：VALUE"
            + (f" ({detail})" if detail else ""), hint=f"Set text to {quote!r}.", key="text")
    out.supported = supported
    if not supported:
        return out
    if units is not None and not memory_visible(units, entry, active):
        dropped = left_out(f"{MEMORY_PREFIX}{entry.scope}/{entry.key}", entry.version, 1) if left_out else None
        if dropped is not None:
            add("invisible-source", f"{cid} is supported by memory but was not in the compiled context:"
                f" {dropped}", hint="Raise the query context's limit (or lower its reserve) so the entry"
                " fits; memory units are packed first, in the order named.")
        else:
            add("invisible-source", f"{cid} is supported by memory but was not in the declared context",
                hint=f"List 'memory:{ref.scope}' (or '{cid}') in the context units, or add"
                f" memory: [{ref.scope}] to a query context.")
        return out
    out.valid = True
    return out


def wire_claim(entry: MemoryEntry) -> dict[str, object]:
    """A valid memory claim in the seven-key shape of SPEC §11, keys in order."""
    claim: dict[str, object] = {
        "text": entry.quote, "quote": entry.quote, "id": entry.id, "scope": entry.scope,
        "key": entry.key, "version": entry.version, "sha256": entry.sha256,
    }
    assert tuple(claim) == MEMORY_CLAIM_KEYS
    return claim


# -- JSON memory claims (SPEC §11, §5.2) -----------------------------------------------------


def checked_claim_id(claim: Mapping[str, Any], parse: Callable[[str], tuple[Ref | None, str]],
                     parts: Callable[[Ref], tuple[object, ...]], keys: tuple[str, ...], shown: str,
                     span: Span, malformed: Callable[..., None]) -> Ref | None:
    """A JSON claim's ``id`` parsed, when it parses and agrees with the claim's own ``keys``
    (SPEC §5.2: ``id`` repeats them); else None, the problem reported through
    ``malformed(span, message)``.

    ``parse`` reads the id (a reference, or None and the reason: :func:`parse_memory_id`,
    :func:`grounding_core.image_claims.parse_region_id`); ``parts`` gives the reference's
    values in ``keys`` order; ``shown`` is the id the keys spell (``memory:user/k@2``).
    """
    ref, problem = parse(claim["id"])
    if ref is None:
        malformed(span, problem)
        return None
    if parts(ref) != tuple(claim[key] for key in keys):
        malformed(span, f"id {claim['id']!r} disagrees with {'/'.join(keys)} ({shown})")
        return None
    return ref



def is_json_memory_claim(claim: Any) -> bool:
    """A JSON claim object is a memory claim when it has ``scope`` or its ``id`` is a memory id."""
    return isinstance(claim, dict) and (
        "scope" in claim or (isinstance(claim.get("id"), str) and is_memory_id(claim["id"])))


def json_claim(claim: dict[str, Any], ptr: str, span_of: Callable[..., Span],
               malformed: Callable[..., None]) -> Claim:
    """Read a JSON memory claim with strict types (exactly the seven keys, full hash).

    Problems are reported through ``malformed(span, message, hint)``; the returned claim has
    ``memory`` set only when every key is well-formed and ``id`` agrees with scope/key/version.
    """
    obj_span = span_of(ptr)
    keys_hint = "A memory claim has exactly: " + ", ".join(MEMORY_CLAIM_KEYS)
    ok = True
    for key in sorted(set(claim) - set(MEMORY_CLAIM_KEYS)):
        malformed(span_of(f"{ptr}/{key.replace('~', '~0').replace('/', '~1')}", key=True),
                  f"unknown memory claim key {key!r}", keys_hint)
        ok = False
    for key in MEMORY_CLAIM_KEYS:
        if key not in claim:
            malformed(obj_span, f"the memory claim has no {key!r}", keys_hint)
            ok = False
            continue
        value = claim[key]
        vspan = span_of(f"{ptr}/{key}")
        if key == "version":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                got = shorten(json.dumps(value, ensure_ascii=False))
                malformed(vspan, f"version must be a positive integer, got {got}")
                ok = False
        elif key == "sha256":
            if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{64}", value):
                malformed(vspan, "sha256 must be 64 lowercase hex digits (the full hash)")
                ok = False
        elif not isinstance(value, str) or not value:
            malformed(vspan, f"{key} must be non-empty text")
            ok = False
    ref: MemoryRef | None = None
    if ok:
        spelled = f"memory:{claim['scope']}/{claim['key']}@{claim['version']}"
        ref = checked_claim_id(claim, parse_memory_id, lambda r: (r.scope, r.key, r.version),
                               ("scope", "key", "version"), spelled, span_of(f"{ptr}/id"), malformed)
        ok = ref is not None
    text = claim["text"] if isinstance(claim.get("text"), str) else ""
    value_spans = tuple((key, span_of(f"{ptr}/{key}")) for key in MEMORY_CLAIM_KEYS if key in claim)
    return Claim(
        sentence=text, sentence_span=obj_span, citation_span=obj_span, citation=None,
        hash_prefix=claim["sha256"] if ok else None, quote=claim["quote"] if ok else None,
        json_text=claim["text"] if ok else None, json_sha256=claim["sha256"] if ok else None,
        value_spans=value_spans, memory=ref if ok else None,
    )


# -- context units ---------------------------------------------------------------------------


def __getattr__(name: str) -> Any:
    """``MemoryContextUnit`` lives in :mod:`grounding_core.memory_units` (a prompt unit needs
    the tokenizer's module, which a check never loads) and is named here as before.
    """
    if name == "MemoryContextUnit":
        from .memory_units import MemoryContextUnit

        return MemoryContextUnit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def render_entry(entry: MemoryEntry) -> str:
    """An entry as a context unit of a rendered prompt (SPEC §8): its id line, then ``KEY：VALUE``."""
    return f"{entry.id}\n{entry.quote}"


def context_units(source: MemorySource, units: Sequence[MemoryUnitSpec]) -> list[MemoryContextUnit]:
    """The memory units a context names (:func:`resolve_units`), as prompt units."""
    from .memory_units import MemoryContextUnit

    return [MemoryContextUnit.of(entry) for entry in resolve_units(source, units)]


__all__: Sequence[str] = (
    "MEMORY_PREFIX", "EmptyMemory", "EntriesMemory", "MemoryCheck", "MemoryEntry", "MemoryEvent", "MemorySource",
    "MemoryUnitSpec", "MemoryWriteError", "active_of", "apply_events", "check_memory_claim",
    "entry_status", "json_claim", "memory_visible", "name_problem", "parse_memory_id",
    "parse_memory_unit", "resolve_units", "scope_entries", "source_of", "wire_claim",
)
