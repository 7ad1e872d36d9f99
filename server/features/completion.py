r"""Completion inside a footnote definition (SPEC §5.1, §10).

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

Trigger characters are ``@`` and ``:``; typing ``[^1]:`` (no space yet) offers doc ids that
insert the missing space too. Lines outside definitions get no items. Only drafts (SPEC §2
globs) are served; the index is read from the current immutable state in a worker thread.
Columns: the cursor is converted to a code-point column with the session codec, and every
edit range back (``server/positions.py`` is the only converter).
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING

from lsprotocol import types

from grounding_core.model import Span
from grounding_core.state import IndexState
from server.features import memory as memory_feature

if TYPE_CHECKING:
    import datetime as dt

    from server.app import GroundingServer, ServerState
    from server.documents import DocumentSnapshot

__all__ = ["TRIGGER_CHARACTERS", "completion_items", "register"]

logger = logging.getLogger(__name__)

TRIGGER_CHARACTERS = ["@", ":", "/"]  # "/" for memory:SCOPE/KEY (SPEC §11)

_DEFINITION = re.compile(r"\[\^[^\]\s]+\]:(?P<space> ?)")
_TYPED = re.compile(
    r"(?P<doc>[^\s@:\[\]\"]*)(?:@(?P<version>[0-9]*)(?::(?P<line>[0-9]*))?)?"
)


def register(server: GroundingServer, state: ServerState) -> None:
    engine = state.engine

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=TRIGGER_CHARACTERS, resolve_provider=False),
    )
    async def completion(ls: GroundingServer, params: types.CompletionParams) -> types.CompletionList | None:
        uri = params.text_document.uri
        snapshot = state.snapshot(uri)
        if snapshot is None or engine.draft_rel(uri) is None or engine.workspace is None:
            return None
        line, column = snapshot.codec.core_position(params.position, snapshot.lines)
        try:
            items = await asyncio.to_thread(
                completion_items, snapshot, line, column, engine.state, engine.today())
        except Exception:
            logger.exception("completion failed at %s:%d:%d", uri, line + 1, column + 1)
            return None
        if items is None:
            return None
        return types.CompletionList(is_incomplete=False, items=items)


def completion_items(snapshot: DocumentSnapshot, line: int, column: int, state: IndexState,
                     today: dt.date) -> list[types.CompletionItem] | None:
    """Items for the cursor at 0-based ``line`` and code-point ``column`` of ``snapshot``.

    None when the cursor is not in the citation id of a definition line. Pure over the
    immutable ``state``; ranges are in the snapshot's client units.
    """
    if line >= len(snapshot.lines):
        return None
    memory_items = memory_feature.completion_items(snapshot, line, column, state)  # memory hook (§11)
    if memory_items is not None:
        return memory_items
    text = snapshot.lines[line]
    match = _DEFINITION.match(text)
    if match is None or column < match.end():
        return None
    id_start = match.end()
    typed = _TYPED.fullmatch(text, id_start, column)
    if typed is None:
        return None  # the cursor is past the id (in the hash or quote)

    def lsp_range(start: int, end: int) -> types.Range:
        return snapshot.codec.lsp_range(Span.line(line, start, end), snapshot.lines)

    doc_prefix = typed["doc"]
    pad = "" if match["space"] else " "
    if typed["version"] is None:
        return _doc_items(state, today, doc_prefix, pad, lsp_range(id_start, column))
    if typed["line"] is None:
        at = id_start + len(doc_prefix) + 1
        return _version_items(state, today, doc_prefix, typed["version"], lsp_range(at, column))
    if not typed["version"] or typed["version"].startswith("0"):
        return []
    return _line_items(state, doc_prefix, int(typed["version"]), typed["line"], pad,
                       lsp_range(id_start, len(text)))


def _doc_items(state: IndexState, today: dt.date, prefix: str, pad: str,
               replace: types.Range) -> list[types.CompletionItem]:
    items = []
    for doc_id in state.doc_ids():
        if not doc_id.startswith(prefix):
            continue
        record = state.newest(doc_id)
        if record is None or not state.is_active(record, today):
            continue
        doc = state.document(record)
        items.append(types.CompletionItem(
            label=doc_id, kind=types.CompletionItemKind.Module, detail=doc.title,
            documentation=f"{doc_id}@{record.version} · {record.path}",
            sort_text=doc_id, filter_text=doc_id,
            text_edit=types.TextEdit(range=replace, new_text=pad + doc_id),
        ))
    return items


def _version_items(state: IndexState, today: dt.date, doc_id: str, prefix: str,
                   replace: types.Range) -> list[types.CompletionItem]:
    versions = state.versions(doc_id)
    if not versions:
        return []
    newest = max(versions)
    items = []
    for rank, number in enumerate(sorted(versions, reverse=True)):
        label = str(number)
        if not label.startswith(prefix):
            continue
        record = versions[number]
        if number != newest:
            detail = "stale"
        else:
            detail = "active" if state.is_active(record, today) else "inactive"
        reason = state.inactive_reason(record, today)
        items.append(types.CompletionItem(
            label=label, kind=types.CompletionItemKind.EnumMember, detail=detail,
            documentation=f"{doc_id}@{number} · {record.path} · sha256:{record.sha256[:12]}"
            + (f" · not active: {reason}" if reason else ""),
            sort_text=f"{rank:06d}", filter_text=label, preselect=number == newest or None,
            text_edit=types.TextEdit(range=replace, new_text=label),
        ))
    return items


def _line_items(state: IndexState, doc_id: str, version: int, prefix: str, pad: str,
                replace: types.Range) -> list[types.CompletionItem]:
    record = state.record(doc_id, version)
    if record is None:
        return []
    doc = state.document(record)
    items = []
    for number in range(doc.front.end_line + 1, len(doc.lines) + 1):
        text = doc.lines[number - 1]
        label = str(number)
        if not text.strip() or not label.startswith(prefix):
            continue
        citation = f"{doc_id}@{version}:{number}"
        field_line = doc.field_lines.get(number)
        if field_line is not None:
            meta = " (meta field: never supports an answer)" if state.is_meta_field(field_line.field) else ""
            documentation = f"{field_line.field} = {field_line.value}{meta}"
        else:
            documentation = "not a field line"
        items.append(types.CompletionItem(
            label=label, kind=types.CompletionItemKind.Reference, detail=text,
            documentation=f"{citation} · {documentation}",
            sort_text=f"{number:08d}", filter_text=citation,
            text_edit=types.TextEdit(
                range=replace, new_text=f'{pad}{citation} sha256:{record.sha256[:12]} "{text}"'),
        ))
    return items
