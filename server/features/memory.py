"""Memory entries in the editor (SPEC §10, §11): hover, definition, completion, status, commands.

The protocol-free logic is ``grounding_core.memory_navigation``; this module converts it to
lsprotocol types and registers the memory commands. Hover, definition, completion and the
status notification are answered by the existing handlers, which call the plain functions
below first (pygls takes one handler per LSP method):

- ``server/features/navigation.py`` hover -> :func:`hover`; definition -> :func:`definition`;
  ``grounding/versionText`` -> :func:`version_text` (the read-only view of an entry and its
  history is served as ``grounding-evidence:/memory%3ASCOPE%2FKEY@N``, so the VS Code
  extension's read-only provider shows it unchanged);
- ``server/features/completion.py`` -> :func:`completion_items` (and ``/`` as a trigger);
- ``server/features/status.py`` -> :func:`status_fields` (``memoryClaims``,
  ``validMemoryClaims`` in ``grounding/status``; the code lens says ``N memory claims``).

Commands (``workspace/executeCommand``; one argument object, as for the other commands). Each
asks the writer first with ``window/showMessageRequest`` and explicit choices; only the
confirming choice writes, anything else (Cancel, dismissing, a client error) writes nothing:

==============================  ====================================================
``grounding.rememberMemory``    ``{scope, key, value, approvedBy?}`` -> choices
                                ``Remember`` / ``Cancel``
``grounding.approveMemory``     ``{id: "memory:S/K@N", by}`` -> ``Approve`` / ``Cancel``
``grounding.forgetMemory``      ``{id: "memory:S/K", reason?}`` -> ``Forget`` / ``Cancel``
==============================  ====================================================

Result: ``{written: bool, message, entry?: {id, status, quote, citation}}``. After a write the
server re-reads the index (as ``grounding.reindex`` does), so open drafts are checked again
against the new memory. Entries written by the CLI in another process are seen at the next
index pass.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from grounding_core.drafts import ParsedDraft
from grounding_core.memory import MemoryEntry, MemoryWriteError, entry_status, parse_memory_id, parse_memory_unit
from grounding_core.memory import source_of as memory_source_of
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

if TYPE_CHECKING:
    from grounding_core.state import IndexState
    from server.app import GroundingServer, ServerState
    from server.documents import DocumentSnapshot
    from server.engine import Engine

__all__ = ["COMMANDS", "completion_items", "definition", "hover", "register", "status_fields", "version_text"]

logger = logging.getLogger(__name__)

COMMANDS = ("grounding.rememberMemory", "grounding.approveMemory", "grounding.forgetMemory")

CONFIRM = {"remember": "Remember", "approve": "Approve", "forget": "Forget"}
CANCEL = "Cancel"


# -- plain functions the existing handlers call ------------------------------------------------


def hover(snapshot: DocumentSnapshot, draft: ParsedDraft, line: int, col: int, state: IndexState,
          kind: types.MarkupKind) -> types.Hover | None:
    """The hover of a memory citation at 0-based ``line``/code-point ``col``, else None.
    Reads the index: call it in a worker thread.
    """
    target = memory_target_at(draft, line, col)
    if target is None:
        return None
    text = memory_hover(target, memory_source_of(state))
    return types.Hover(contents=types.MarkupContent(kind=kind, value=text), range=snapshot.lsp_range(target.span))


def definition(snapshot: DocumentSnapshot, draft: ParsedDraft, line: int, col: int,
               state: IndexState) -> list[types.Location] | None:
    """Go to definition on a memory citation: the cited version's line in the read-only view of
    its key (``grounding-evidence:/memory%3AS%2FK@N``). None when not on one or it is unknown.
    """
    from server.features.navigation import version_uri

    target = memory_target_at(draft, line, col)
    if target is None:
        return None
    ref = target.ref
    view = memory_view(memory_source_of(state), ref.scope, ref.key)
    if view is None or ref.version not in view.version_lines:
        return None
    lines = view.text.split("\n")
    number = view.version_lines[ref.version]
    span = Span.line(number - 1, 0, len(lines[number - 1]))
    return [types.Location(uri=version_uri(view_doc_id(ref.scope, ref.key), ref.version),
                           range=snapshot.codec.lsp_range(span, lines))]


def version_text(doc_id: str, version: int, state: IndexState) -> dict[str, Any] | None:
    """``grounding/versionText`` for the view of a memory key, or None when ``doc_id`` is an
    evidence doc_id (the caller then answers as before).
    """
    from server.features.navigation import version_uri

    parsed = parse_view_doc_id(doc_id)
    if parsed is None:
        return None
    view = memory_view(memory_source_of(state), *parsed)
    if view is None:
        return {}
    return {"uri": version_uri(doc_id, version), "text": view.text, "title": view.title, "readOnly": True,
            "docId": doc_id, "version": version, "path": "", "languageId": "markdown"}


def completion_items(snapshot: DocumentSnapshot, line: int, column: int,
                     state: IndexState) -> list[types.CompletionItem] | None:
    """Completion items when the cursor is in a ``memory:`` id of a definition, else None."""
    if line >= len(snapshot.lines):
        return None
    found = memory_completions(snapshot.lines[line], column, memory_source_of(state))
    if found is None:
        return None
    kinds = {"scope": types.CompletionItemKind.Folder, "key": types.CompletionItemKind.Field,
             "version": types.CompletionItemKind.Reference}
    return [types.CompletionItem(
        label=c.label, kind=kinds[c.stage], detail=c.detail, documentation=c.documentation,
        sort_text=c.sort, filter_text=c.filter,
        preselect=c.preselect or None,
        text_edit=types.TextEdit(range=snapshot.codec.lsp_range(Span.line(line, c.start, c.end), snapshot.lines),
                                 new_text=c.new_text),
    ) for c in found]


def status_fields(report: DraftReport) -> dict[str, int]:
    """``memoryClaims`` and ``validMemoryClaims`` for ``grounding/status``."""
    claims, valid = memory_claim_counts(report)
    return {"memoryClaims": claims, "validMemoryClaims": valid}


def lens_suffix(report: DraftReport) -> str:
    """`` · 1 memory claim`` for the code lens (empty without memory claims)."""
    claims, _ = memory_claim_counts(report)
    return f" · {claims} memory claim{'' if claims == 1 else 's'}" if claims else ""


# -- commands ---------------------------------------------------------------------------------


def _object(args: tuple[Any, ...]) -> dict[str, Any]:
    if len(args) == 1 and isinstance(args[0], list):
        args = tuple(args[0])
    if len(args) == 1 and isinstance(args[0], dict):
        return args[0]
    raise JsonRpcInvalidParams("expected one argument object")


def _text(obj: dict[str, Any], key: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise JsonRpcInvalidParams(f"'{key}' must be non-empty text")
    return value


def _entry_json(entry: MemoryEntry, state: IndexState) -> dict[str, Any]:
    versions = memory_source_of(state).memory_versions(entry.scope, entry.key)
    status = entry_status(versions, entry.version)[0] if entry.version in versions else "unknown"
    return {"id": entry.id, "status": status, "quote": entry.quote, "citation": entry.citation()}


def register(server: GroundingServer, state: ServerState) -> None:
    """Register the three memory commands (module docstring)."""
    engine = state.engine

    async def ready() -> Engine:
        await engine.indexed.wait()
        if engine.workspace is None:
            raise JsonRpcInvalidParams("no workspace folder is open")
        return engine

    async def confirmed(message: str, act: str) -> bool:
        """Ask the writer; True only for the explicit confirming choice."""
        if engine.workspace is not None and engine.workspace.config.index == ":memory:":
            message += " (The index is in memory: the entry lasts until the server stops.)"
        try:
            answer = await server.window_show_message_request_async(types.ShowMessageRequestParams(
                type=types.MessageType.Warning, message=message,
                actions=[types.MessageActionItem(title=CONFIRM[act]), types.MessageActionItem(title=CANCEL)]))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a client that cannot ask: nothing is written
            logger.info("window/showMessageRequest failed: %s", exc)
            return False
        return answer is not None and answer.title == CONFIRM[act]

    async def write(act: str, run: Any) -> dict[str, Any]:
        assert engine.workspace is not None
        try:
            entry: MemoryEntry = await asyncio.to_thread(run)
        except MemoryWriteError as exc:
            return {"written": False, "message": f"Nothing was written: {exc}."}
        engine.request_reindex()
        await engine.wait_reindexed()
        out = {"written": True, "entry": _entry_json(entry, engine.state)}
        out["message"] = {"remember": f"Remembered {entry.id}: {entry.quote}.",
                          "approve": f"Approved {entry.id}.",
                          "forget": f"Forgot memory:{entry.scope}/{entry.key}."}[act]
        return out

    def declined() -> dict[str, Any]:
        return {"written": False, "message": "Nothing was written."}

    @server.command("grounding.rememberMemory")
    async def remember(*args: Any) -> dict[str, Any]:
        obj = _object(args)
        scope, key, value = _text(obj, "scope"), _text(obj, "key"), _text(obj, "value")
        approved_by = _text(obj, "approvedBy", required=False)
        assert scope is not None and key is not None and value is not None
        ws = (await ready()).workspace
        assert ws is not None
        versions = memory_source_of(engine.state).memory_versions(scope, key)
        ident = f"memory:{scope}/{key}@{max(versions, default=0) + 1}"
        who = f"approved by {approved_by.strip()}" if approved_by else "a proposal, inactive until approved"
        if not await confirmed(f"Remember {ident} = “{key}：{value.strip()}” ({who})? It is appended to"
                               " the index's event log.", "remember"):
            return declined()
        return await write("remember", lambda: ws.store.remember(scope, key, value, approved_by))

    @server.command("grounding.approveMemory")
    async def approve(*args: Any) -> dict[str, Any]:
        obj = _object(args)
        ident, by = _text(obj, "id"), _text(obj, "by")
        assert ident is not None and by is not None
        ref, problem = parse_memory_id(ident)
        if ref is None:
            raise JsonRpcInvalidParams(problem)
        ws = (await ready()).workspace
        assert ws is not None
        entry = memory_source_of(engine.state).memory_versions(ref.scope, ref.key).get(ref.version)
        shown = f" (“{entry.quote}”)" if entry is not None else ""
        if not await confirmed(f"Approve {ref.id}{shown} as {by.strip()}?", "approve"):
            return declined()
        return await write("approve", lambda: ws.store.approve(ref.scope, ref.key, ref.version, by))

    @server.command("grounding.forgetMemory")
    async def forget(*args: Any) -> dict[str, Any]:
        obj = _object(args)
        ident = _text(obj, "id")
        reason = _text(obj, "reason", required=False) or ""
        assert ident is not None
        unit = parse_memory_unit(ident)
        if unit is None or unit.key is None or unit.version is not None:
            raise JsonRpcInvalidParams("'id' must be memory:SCOPE/KEY (every version is forgotten)")
        scope, key = unit.scope, unit.key
        ws = (await ready()).workspace
        assert ws is not None
        if not await confirmed(f"Forget memory:{scope}/{key}? Every version becomes inactive, and"
                               " citations of it fail until it is remembered again.", "forget"):
            return declined()
        return await write("forget", lambda: ws.store.forget(scope, key, reason))
