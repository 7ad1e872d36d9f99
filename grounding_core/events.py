"""The event log's entries (SPEC §4): the single source of truth of the index.

``replay(n)`` is the state after the events with ``seq <= n``; every derived table of the
store (``grounding_core.store``) and the in-memory oracle (``grounding_core.state``) are
functions of this log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EventKind = Literal["import", "revoke", "remember", "approve", "forget"]
EVIDENCE_KINDS: tuple[str, ...] = ("import", "revoke")
MEMORY_KINDS: tuple[str, ...] = ("remember", "approve", "forget")
"""Memory events (SPEC §11): their fields are JSON in ``data`` (``grounding_core.memory``);
the evidence derivations skip them and ``grounding_core.memory_store`` derives memory."""
EVENT_KINDS: tuple[str, ...] = (*EVIDENCE_KINDS, *MEMORY_KINDS)
REPLACED_REASON = "no longer indexed from "
"""How a ``revoke`` event's reason starts when its file still exists but no longer yields that
version (written by the scan, ``grounding_core.store``): edited in place to a newer version,
claimed by another file, or its front matter broke. When a newer version exists, activity
messages say "version N supersedes it" instead of "revoked" (``IndexSnapshot.inactive_reason``)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the append-only log (SPEC §4).

    ``import``: a version's full text (BOM removed) and the sha256 of its raw bytes;
    ``declared`` tells whether front matter declared the version. ``revoke``: the version
    stops being active (``reason``: ``deleted``, ``status: revoked``, ...). Memory events
    (``remember``, ``approve``, ``forget``; SPEC §11) carry their fields as JSON in ``data``.
    ``seq`` is the 1-based position in the log (0 for an event not appended yet).
    """

    seq: int
    kind: EventKind
    doc_id: str
    version: int
    sha256: str = ""
    path: str = ""
    text: str = ""
    declared: bool = False
    reason: str = ""
    data: str = ""
    recorded_at: str = ""
    """When the event was appended (UTC, ISO 8601); memory entries show it (SPEC §11)."""
