"""Memory entries in the editor (SPEC §10, §11): hover, definition, completion, status, commands.

The protocol-free logic is ``grounding_core.memory_navigation``; this module turns it into LSP
answers. Hover, definition, ``grounding/versionText``, completion and the status notification
have one handler each (``server/app.py``), which call the plain functions below first, in the
worker thread that already serves them (a memory lookup is one indexed query on the captured
:class:`~server.session.IndexView`'s snapshot, never work on the event loop):

- ``server/features/navigation.py`` hover -> :func:`hover_at`; definition -> :func:`definition_at`;
  ``grounding/versionText`` -> :func:`version_text` (the read-only view of an entry and its
  history is a version document like an old evidence version's: the copy
  ``.grounding/versions/memory%3ASCOPE/KEY@N.md``, or ``grounding-evidence:/memory%3ASCOPE%2FKEY@N``
  for a client that set ``versionDocuments: "virtual"``);
- ``server/features/completion.py`` -> :func:`completions_at` (and ``/`` as a trigger);
- ``server/features/status.py`` -> :func:`status_fields` (``memoryClaims``,
  ``validMemoryClaims`` in ``grounding/status``) and :func:`lens_suffix` (`` · N memory claims``).

Commands (``workspace/executeCommand``; one argument object, as for the other commands), each
forwarded from ``server/app.py``. Each asks the writer first with ``window/showMessageRequest``
and explicit choices; only the confirming choice writes, anything else (Cancel, dismissing, a
client error) writes nothing:

==============================  ====================================================
``grounding.rememberMemory``    ``{scope, key, value, approvedBy?}`` -> choices
                                ``Remember`` / ``Cancel``
``grounding.approveMemory``     ``{id: "memory:S/K@N", by}`` -> ``Approve`` / ``Cancel``
``grounding.forgetMemory``      ``{id: "memory:S/K", reason?}`` -> ``Forget`` / ``Cancel``
==============================  ====================================================

Result: ``{written: bool, message, entry?: {id, status, quote, citation}}``. The write runs in
the session's writer thread (one at a time with scans: the index has one writer), which then
takes the store's new snapshot; it becomes the session's view and open drafts are checked
again against the new memory (no evidence rescan: memory events touch no evidence). Entries
written by the CLI in another process are seen at the next index pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from grounding_core.complete import Completions, Entry
from grounding_core.drafts import ParsedDraft
from grounding_core.index import IndexSnapshot
from grounding_core.memory import MemoryEntry, MemoryWriteError, entry_status, parse_memory_id, parse_memory_unit
from grounding_core.memory_navigation import (
    memory_claim_counts,
    memory_completions,
    memory_hover,
    memory_target_at,
    memory_view,
    parse_view_doc_id,
    view_doc_id,
)
from grounding_core.model import DraftReport, Span
from grounding_core.workspace import Workspace
from server.convert import lsp_completion_list, lsp_hover
from server.documents import DocumentSnapshot
from server.protocol import command_object, version_uri
from server.session import IndexView, Session

__all__ = ["COMMANDS", "CONFIRM", "TRIGGER_CHARACTERS", "approve", "completions_at", "definition_at", "forget",
           "hover_at", "lens_suffix", "remember", "status_fields", "version_text"]

COMMANDS = ("grounding.rememberMemory", "grounding.approveMemory", "grounding.forgetMemory")
TRIGGER_CHARACTERS = ["/"]
"""Completion triggers memory ids add to ``@`` and ``:`` (``memory:SCOPE/KEY``)."""

logger = logging.getLogger(__name__)

CONFIRM = {"remember": "Remember", "approve": "Approve", "forget": "Forget"}
CANCEL = "Cancel"
INDEXING = "Grounding is still indexing; hover again in a moment."


# -- plain functions the existing handlers call (worker threads) ----------------------------


def hover_at(draft: ParsedDraft, document: DocumentSnapshot, view: IndexView | None, line: int, col: int,
             kind: types.MarkupKind) -> types.Hover | None:
    """The hover of a memory citation at 0-based ``line`` / code-point ``col``; None when the
    cursor is not on one. Reads one key's versions from the view's snapshot.
    """
    target = memory_target_at(draft, line, col)
    if target is None:
        return None
    text = memory_hover(target, view.snapshot) if view is not None else INDEXING
    return lsp_hover(text, target.span, document.lines, document.codec, kind)


def on_memory_citation(draft: ParsedDraft, line: int, col: int) -> bool:
    """True when the cursor is on a memory citation (the evidence lookups then stay out)."""
    return memory_target_at(draft, line, col) is not None


def definition_at(draft: ParsedDraft, document: DocumentSnapshot, view: IndexView, line: int,
                  col: int, version_mode: str = "virtual") -> list[types.Location] | None:
    """Go to definition on a memory citation: the cited version's line in the read-only view of
    its key, a version document like an old evidence version's (``server/features/versions.py``):
    the copy ``.grounding/versions/memory%3AS/K@N.md`` (``version_mode`` ``"file"``) or
    ``grounding-evidence:/memory%3AS%2FK@N`` (``"virtual"``). None when not on one or it is
    unknown. Worker thread (the copy is written when missing or different).
    """
    from server.features import versions

    target = memory_target_at(draft, line, col)
    if target is None:
        return None
    ref = target.ref
    found = memory_view(view.snapshot, ref.scope, ref.key)
    if found is None or ref.version not in found.version_lines:
        return None
    lines = found.text.split("\n")
    number = found.version_lines[ref.version]
    span = Span.line(number - 1, 0, len(lines[number - 1]))
    doc_id = view_doc_id(ref.scope, ref.key)
    uri = version_uri(doc_id, ref.version)
    if version_mode == versions.FILE:
        try:
            copy = versions.write_copy(view.config.root, versions.file_name(doc_id, ref.version, ""), found.text)
            uri = from_fs_path(str(copy)) or uri
        except OSError as exc:
            logger.warning("cannot write the read-only view of %s@%s: %s", doc_id, ref.version, exc)
    return [types.Location(uri=uri, range=document.codec.lsp_range(span, lines))]


def version_text(view: IndexView, doc_id: str, version: int) -> dict[str, Any] | None:
    """``grounding/versionText`` for the view of a memory key (``{}`` when the key is unknown),
    or None when ``doc_id`` is an evidence doc_id (the caller then answers as for evidence).
    """
    parsed = parse_view_doc_id(doc_id)
    if parsed is None:
        return None
    found = memory_view(view.snapshot, *parsed)
    if found is None:
        return {}
    return {"uri": version_uri(doc_id, version), "text": found.text, "title": found.title, "readOnly": True,
            "docId": doc_id, "version": version, "path": "", "languageId": "markdown"}


_STAGE_KINDS = {"scope": "scope", "key": "key", "version": "memory-version"}


def completions_at(document: DocumentSnapshot, view: IndexView, line: int,
                   column: int) -> types.CompletionList | None:
    """Completion when the cursor is in a ``memory:`` id of a definition (scope -> key ->
    version), else None. At most 200 scopes or keys are read.
    """
    if line >= len(document.lines):
        return None
    found = memory_completions(document.lines[line], column, view.snapshot)
    if found is None:
        return None
    entries = tuple(Entry(c.label, _STAGE_KINDS[c.stage], c.detail, c.documentation, c.sort, c.filter,
                          Span.line(line, c.start, c.end), c.new_text, c.preselect) for c in found)
    return lsp_completion_list(Completions(entries), document.lines, document.codec)


def status_fields(report: DraftReport) -> dict[str, int]:
    """``memoryClaims`` and ``validMemoryClaims`` for ``grounding/status``."""
    claims, valid = memory_claim_counts(report)
    return {"memoryClaims": claims, "validMemoryClaims": valid}


def lens_suffix(report: DraftReport) -> str:
    """`` · 1 memory claim`` for the code lens (empty without memory claims)."""
    claims, _ = memory_claim_counts(report)
    return f" · {claims} memory claim{'' if claims == 1 else 's'}" if claims else ""


# -- commands -------------------------------------------------------------------------------


def _text(obj: dict[str, Any], key: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise JsonRpcInvalidParams(f"'{key}' must be non-empty text")
    return value


async def _ready(session: Session) -> tuple[Workspace, IndexView]:
    await session.ready.wait()
    view = session.current_view()
    if session.workspace is None or view is None:
        raise JsonRpcInvalidParams("no workspace folder is open")
    return session.workspace, view


async def _confirmed(session: Session, ws: Workspace, message: str, act: str) -> bool:
    """Ask the writer; True only for the explicit confirming choice."""
    if ws.config.index == ":memory:":
        message += " (The index is in memory: the entry lasts until the server stops.)"
    choice = await session.client.show_message_request(types.MessageType.Warning, message, [CONFIRM[act], CANCEL])
    return choice == CONFIRM[act]


def _entry_json(entry: MemoryEntry, snapshot: IndexSnapshot) -> dict[str, Any]:
    versions = snapshot.memory_versions(entry.scope, entry.key)
    status = entry_status(versions, entry.version)[0] if entry.version in versions else "unknown"
    return {"id": entry.id, "status": status, "quote": entry.quote, "citation": entry.citation()}


def _write_now(ws: Workspace, run: Callable[[], MemoryEntry]) -> tuple[MemoryEntry, IndexSnapshot]:
    """Writer thread: append the event, then take the store's snapshot that holds it."""
    entry = run()
    return entry, ws.store.snapshot()


async def _write(session: Session, ws: Workspace, act: str, run: Callable[[], MemoryEntry]) -> dict[str, Any]:
    from server.features import diagnostics

    epoch = session.epoch
    try:
        entry, snapshot = await session.writer.run(_write_now, ws, run)
    except MemoryWriteError as exc:
        return {"written": False, "message": f"Nothing was written: {exc}."}
    view = session.view
    if epoch == session.epoch and (view is None or view.epoch != epoch or view.snapshot.seq < snapshot.seq):
        session.set_snapshot(snapshot)  # a scan that ran after the write has it already
        diagnostics.recheck_open_drafts(session)
    message = {"remember": f"Remembered {entry.id}: {entry.quote}.", "approve": f"Approved {entry.id}.",
               "forget": f"Forgot memory:{entry.scope}/{entry.key}."}[act]
    return {"written": True, "message": message, "entry": _entry_json(entry, snapshot)}


def _declined() -> dict[str, Any]:
    return {"written": False, "message": "Nothing was written."}


async def remember(session: Session, *args: Any) -> dict[str, Any]:
    """``grounding.rememberMemory {scope, key, value, approvedBy?}`` (module docstring)."""
    obj = command_object(args)
    scope, key, value = _text(obj, "scope"), _text(obj, "key"), _text(obj, "value")
    approved_by = _text(obj, "approvedBy", required=False)
    assert scope is not None and key is not None and value is not None
    ws, view = await _ready(session)
    versions = await session.readers.run(view.snapshot.memory_versions, scope, key)
    ident = f"memory:{scope}/{key}@{max(versions, default=0) + 1}"
    who = f"approved by {approved_by.strip()}" if approved_by else "a proposal, inactive until approved"
    if not await _confirmed(session, ws, f"Remember {ident} = “{key}：{value.strip()}” ({who})? It is"
                            " appended to the index's event log.", "remember"):
        return _declined()
    return await _write(session, ws, "remember", lambda: ws.store.remember(scope, key, value, approved_by))


async def approve(session: Session, *args: Any) -> dict[str, Any]:
    """``grounding.approveMemory {id: "memory:S/K@N", by}`` (module docstring)."""
    obj = command_object(args)
    ident, by = _text(obj, "id"), _text(obj, "by")
    assert ident is not None and by is not None
    ref, problem = parse_memory_id(ident)
    if ref is None:
        raise JsonRpcInvalidParams(problem)
    ws, view = await _ready(session)
    entry = await session.readers.run(view.snapshot.memory_entry, ref.scope, ref.key, ref.version)
    shown = f" (“{entry.quote}”)" if entry is not None else ""
    if not await _confirmed(session, ws, f"Approve {ref.id}{shown} as {by.strip()}?", "approve"):
        return _declined()
    return await _write(session, ws, "approve", lambda: ws.store.approve(ref.scope, ref.key, ref.version, by))


async def forget(session: Session, *args: Any) -> dict[str, Any]:
    """``grounding.forgetMemory {id: "memory:S/K", reason?}`` (module docstring)."""
    obj = command_object(args)
    ident = _text(obj, "id")
    reason = _text(obj, "reason", required=False) or ""
    assert ident is not None
    unit = parse_memory_unit(ident)
    if unit is None or unit.key is None or unit.version is not None:
        raise JsonRpcInvalidParams("'id' must be memory:SCOPE/KEY (every version is forgotten)")
    scope, key = unit.scope, unit.key
    ws, _view = await _ready(session)
    if not await _confirmed(session, ws, f"Forget memory:{scope}/{key}? Every version becomes inactive, and"
                            " citations of it fail until it is remembered again.", "forget"):
        return _declined()
    return await _write(session, ws, "forget", lambda: ws.store.forget(scope, key, reason))
