"""Server-side commands (``workspace/executeCommand``, SPEC §10).

Arguments: each command takes one object; clients may send it as ``arguments: [{...}]`` (VS
Code sends a list) or, for the commands that only need a document, as ``[uri]`` (the code
lens does). Results are JSON objects; a ``message`` key is a sentence for the user.

==========================  ==========================================================
``grounding.reindex``       ``{}`` -> rescan the evidence now and wait for it;
                            ``{documents, versions, active, conflicts, events}``
``grounding.showConflicts`` ``{}`` -> ``[{subject, field, values: [{value, doc_id,
                            version, line, path}]}]`` over the whole active index
                            (``path`` relative to the workspace root)
``grounding.insertCitation`` ``{uri, position}`` -> applies (``workspace/applyEdit``) the
                            best citation for the sentence at ``position`` (client
                            units); ``{applied, citation, label, message}``
``grounding.draftAnswer``   ``{uri, question?, fields?, subject?, limit?, reserve?}`` ->
                            generates an answer from visible lines only (SPEC §8, §13);
                            question, fields and subject default to the open draft's
                            front matter; without fields the closed question grammar
                            decides (a rejected question inserts nothing and its
                            ``unsupportedTerms`` are shown); with ``uri: null``
                            returns ``{markdown, status, reason, ...}``, else inserts
                            it at the end of that document
``grounding.fixAll``        ``{uri}`` -> applies every safe fix (``applied, fixes``)
``grounding.showContext``   ``{uri}`` | ``uri`` -> the draft's context: for a ``query``
                            context the compiled summary (kept/skipped units, tokens)
==========================  ==========================================================

``draftAnswer`` into an existing document: a blank document gets the whole generated draft
(front matter included); a document with text gets only the body — the claim lines, the
HTML comments about missing fields or conflicts and the definitions — with footnote labels
renumbered past the ones the document already uses, so no front matter lands mid-document and
no label collides. The inserted claims are checked against the document's own context.

Invalid arguments are a JSON-RPC ``InvalidParams`` error; a draft that is not open is read
from disk. Heavy work runs in worker threads; edits go through ``workspace/applyEdit`` (when
the client cannot apply edits, the ``WorkspaceEdit`` is returned under ``edit``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcInvalidParams

from grounding_core.budget import BudgetError
from grounding_core.conflicts import all_conflicts
from grounding_core.context import DEFAULT_LIMIT, DEFAULT_RESERVE, compile_context
from grounding_core.model import Edit, Span
from grounding_core.question import answer_question
from grounding_core.text import LINE_BREAK
from server.features.actions import (
    citation_candidates,
    citation_edits,
    current_result,
    fix_all_edits,
    lsp_workspace_edit,
    new_label,
    sentence_at,
)

if TYPE_CHECKING:
    from server.app import GroundingServer, ServerState
    from server.documents import DocumentSnapshot
    from server.engine import DraftResult

__all__ = ["COMMANDS", "register"]

logger = logging.getLogger(__name__)

COMMANDS = (
    "grounding.reindex",
    "grounding.showConflicts",
    "grounding.insertCitation",
    "grounding.draftAnswer",
    "grounding.fixAll",
    "grounding.showContext",
)

_LABEL_DEF = re.compile(r"^\[\^(\d+)\]: ")
_LABEL_END = re.compile(r"\[\^(\d+)\]$")


def _object(args: tuple[Any, ...], positional: tuple[str, ...] = ()) -> dict[str, Any]:
    """The command's argument object from ``[{...}]``, ``[[{...}]]``, ``{...}`` or positionals."""
    if len(args) == 1 and isinstance(args[0], list):
        args = tuple(args[0])
    if len(args) == 1 and isinstance(args[0], dict):
        return args[0]
    if not args:
        return {}
    if len(args) <= len(positional):
        return dict(zip(positional, args, strict=False))
    raise JsonRpcInvalidParams(f"expected one argument object, got {len(args)} arguments")


def _uri(obj: dict[str, Any], required: bool = True) -> str | None:
    uri = obj.get("uri")
    if uri is None and not required:
        return None
    if not isinstance(uri, str) or not uri:
        raise JsonRpcInvalidParams("'uri' must be a document URI")
    return uri


def register(server: GroundingServer, state: ServerState) -> None:
    engine = state.engine

    async def ready() -> None:
        await engine.indexed.wait()
        if engine.workspace is None:
            raise JsonRpcInvalidParams("no workspace folder is open")

    async def result_of(uri: str) -> DraftResult:
        """The current check of ``uri``: the open buffer, else the file on disk."""
        result = await current_result(state, uri)
        if result is not None:
            return result
        rel = engine.draft_rel(uri)
        if rel is None:
            raise JsonRpcInvalidParams(f"{uri} is not a Grounding draft (see the drafts globs)")
        try:
            snapshot = server.workspace.get_text_document(uri).snapshot()
        except OSError as exc:
            raise JsonRpcInvalidParams(f"cannot read {uri}: {exc}") from exc
        return await asyncio.to_thread(engine.check_snapshot, snapshot, rel)

    async def apply(snapshot: DocumentSnapshot, edits: list[Edit], label: str) -> dict[str, Any]:
        edit = lsp_workspace_edit(server, snapshot, edits)
        if not get_capability(server.client_capabilities, "workspace.apply_edit", False):
            return {"applied": False, "edit": server.protocol._converter.unstructure(edit)}
        response = await server.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label=label))
        out: dict[str, Any] = {"applied": bool(response.applied)}
        if not response.applied and response.failure_reason:
            out["failureReason"] = response.failure_reason
        return out

    # -- grounding.reindex ---------------------------------------------------------------

    @server.command("grounding.reindex")
    async def reindex(*args: Any) -> dict[str, Any]:
        await ready()
        engine.request_reindex()
        await engine.wait_reindexed()
        index_state, today = engine.state, engine.today()

        def summary() -> dict[str, Any]:
            doc_ids = index_state.doc_ids()
            return {
                "documents": len(doc_ids),
                "versions": sum(len(index_state.versions(d)) for d in doc_ids),
                "active": sum(1 for _ in index_state.active_records(today)),
                "conflicts": len(all_conflicts(index_state, today)),
                "events": index_state.seq,
            }

        return await asyncio.to_thread(summary)

    # -- grounding.showConflicts ---------------------------------------------------------

    @server.command("grounding.showConflicts")
    async def show_conflicts(*args: Any) -> list[dict[str, Any]]:
        await ready()
        assert engine.workspace is not None
        config, index_state, today = engine.workspace.config, engine.state, engine.today()

        def listing() -> list[dict[str, Any]]:
            return [{
                "subject": c.subject, "field": c.field,
                "values": [{"value": kl.value, "doc_id": kl.doc_id, "version": kl.version,
                            "line": kl.line, "path": config.evidence_display(kl.path)}
                           for kl in c.lines],
            } for c in all_conflicts(index_state, today)]

        return await asyncio.to_thread(listing)

    # -- grounding.insertCitation --------------------------------------------------------

    @server.command("grounding.insertCitation")
    async def insert_citation(*args: Any) -> dict[str, Any]:
        obj = _object(args, ("uri", "position"))
        uri = _uri(obj)
        assert uri is not None
        try:
            position = types.Position(line=int(obj["position"]["line"]),
                                      character=int(obj["position"]["character"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise JsonRpcInvalidParams("'position' must be {line, character}") from exc
        await ready()
        result = await result_of(uri)
        snapshot = result.snapshot
        line, column = snapshot.codec.core_position(position, snapshot.lines)
        sentence = sentence_at(result.draft, line, column)
        if sentence is None:
            return {"applied": False, "message": "No sentence at the cursor to cite."}
        candidates = await asyncio.to_thread(citation_candidates, engine, result.draft,
                                             sentence.text, 1)
        if not candidates:
            return {"applied": False,
                    "message": "No active evidence line matches this sentence."}
        best = candidates[0]
        edits, label = citation_edits(snapshot.text, snapshot.lines, sentence.span, best)
        out = await apply(snapshot, edits, f"Cite {best.id}")
        out.update(citation=best.id, label=label, line=best.text)
        if out["applied"]:
            out["message"] = f"Cited {best.id} as [^{label}]."
        return out

    # -- grounding.draftAnswer -----------------------------------------------------------

    @server.command("grounding.draftAnswer")
    async def draft_answer(*args: Any) -> dict[str, Any]:
        obj = _object(args)
        uri = _uri(obj, required=False)
        if uri is not None:  # question hook (SPEC §13): the open draft's question, fields, subject
            await ready()
            obj = {**(await _draft_request(uri)), **{k: v for k, v in obj.items() if v is not None}}
        question = obj.get("question")
        if not isinstance(question, str) or not question.strip():
            raise JsonRpcInvalidParams("'question' must be non-empty text")
        fields = obj.get("fields", [])
        if isinstance(fields, str):
            fields = [fields]
        if not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields):
            raise JsonRpcInvalidParams("'fields' must be a list of field names")
        subject = obj.get("subject")
        if subject is not None and (not isinstance(subject, str) or not subject):
            raise JsonRpcInvalidParams("'subject' must be non-empty text")
        budget = {}
        for key, default in (("limit", DEFAULT_LIMIT), ("reserve", DEFAULT_RESERVE)):
            value = obj.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise JsonRpcInvalidParams(f"'{key}' must be a positive number of tokens")
            budget[key] = value
        await ready()
        assert engine.workspace is not None
        ws = engine.workspace
        try:
            answer = await asyncio.to_thread(
                answer_question, ws.store, engine.state, ws.config, engine.today(),
                question.strip(), list(fields), subject, budget["limit"], budget["reserve"])
        except BudgetError as exc:
            return {"applied": False, "status": None, "message": str(exc)}
        markdown = answer.markdown()
        out: dict[str, Any] = {
            "status": answer.wire.status.value,
            "claims": [str(c["id"]) for c in answer.wire.claims],
            "missingFields": list(answer.wire.missing_fields),
            "conflicts": list(answer.conflicts),
            "outputTokens": answer.wire.output_tokens,
            "reason": answer.facts.get("reason"),
        }
        rejected = _rejection(answer.facts)
        if rejected is not None:  # the grammar refused the question: say why, insert nothing
            out.update(applied=False, message=rejected, markdown=markdown,
                       unsupportedTerms=answer.facts.get("unsupported_terms", []),
                       subjects=answer.facts.get("subjects", []))
            server.window_show_message(types.ShowMessageParams(types.MessageType.Warning, rejected))
            return out
        if uri is None:
            out.update(applied=False, markdown=markdown)
            return out
        if engine.draft_rel(uri) is None:
            raise JsonRpcInvalidParams(f"{uri} is not a Grounding draft (see the drafts globs)")
        snapshot = state.snapshot(uri) or server.workspace.get_text_document(uri).snapshot()
        inserted = _insertion(snapshot, markdown)
        out.update(await apply(snapshot, [inserted], "Grounding: draft an answer"))
        out["markdown"] = inserted.new_text
        if out["applied"]:
            n = len(out["claims"])
            out["message"] = f"Inserted a {out['status']} answer with {n} claim{'' if n == 1 else 's'}."
        return out

    async def _draft_request(uri: str) -> dict[str, Any]:
        """The question, fields and subject of the draft ``uri`` (open buffer, else the file)."""
        result = await result_of(uri)
        draft = result.draft
        out: dict[str, Any] = {}
        if draft.question:
            out["question"] = draft.question
        if draft.fields:
            out["fields"] = [name for name, _ in draft.fields]
        if draft.subject:
            out["subject"] = draft.subject
        return out

    # -- grounding.fixAll ----------------------------------------------------------------

    @server.command("grounding.fixAll")
    async def fix_all(*args: Any) -> dict[str, Any]:
        uri = _uri(_object(args, ("uri",)))
        assert uri is not None
        await ready()
        result = await result_of(uri)
        edits = fix_all_edits(result.report.findings)
        if not edits:
            return {"applied": False, "fixes": 0, "message": "No safe fixes to apply."}
        out = await apply(result.snapshot, edits, "Grounding: fix all citations")
        out["fixes"] = len(edits)
        if out["applied"]:
            out["message"] = f"Applied {len(edits)} fix{'' if len(edits) == 1 else 'es'}."
        return out

    # -- grounding.showContext -----------------------------------------------------------

    @server.command("grounding.showContext")
    async def show_context(*args: Any) -> dict[str, Any]:
        uri = _uri(_object(args, ("uri",)))
        assert uri is not None
        await ready()
        assert engine.workspace is not None
        result = await result_of(uri)
        draft, report = result.draft, result.report
        out: dict[str, Any] = {
            "question": draft.question, "fields": [name for name, _ in draft.fields],
            "status": report.status.value, "outputTokens": report.output_tokens,
            "reserve": report.output_reserve,
        }
        spec = draft.context
        if spec is None:
            out.update(kind=None, message="The draft declares no context; visibility is not checked.")
            return out
        out["kind"] = spec.kind
        if spec.error is not None:
            out["error"] = spec.error
            return out
        if spec.kind == "units":
            out["units"] = [_unit_text(u) for u in spec.units]
        elif spec.kind == "log":
            out["log"] = spec.log
        else:
            ws, index_state, today = engine.workspace, engine.state, engine.today()
            compiled = await asyncio.to_thread(compile_context, ws.store, index_state, ws.config,
                                               spec, draft.question or "", today)
            out["context"] = compiled.summary()
        return out


def _rejection(facts: dict[str, Any]) -> str | None:
    """The message for a question the closed grammar refused (SPEC §13), else None."""
    reason = facts.get("reason")
    if reason == "unsupported_terms":
        terms = "、".join(facts.get("unsupported_terms", []))
        return (f"Grounding: the question was not answered: {terms} names no known subject, field or"
                " measured value (unsupported_terms).")
    if reason == "ambiguous_subject":
        names = "、".join(s if s is not None else "(no subject)" for s in facts.get("subjects", []))
        return f"Grounding: the question concerns several subjects ({names}); ask about one (ambiguous_subject)."
    if reason == "no_field":
        return "Grounding: the question names no known field (no_field); add fields to the draft."
    return None


def _unit_text(unit: Any) -> str:
    if unit.text is not None:
        return f"{unit.doc_id}@{unit.version} (text)"
    if unit.start is None:
        return f"{unit.doc_id}@{unit.version}"
    return f"{unit.doc_id}@{unit.version}:{unit.start}-{unit.end}"


def _insertion(snapshot: DocumentSnapshot, markdown: str) -> Edit:
    """An edit appending the generated ``markdown`` to ``snapshot`` (see module docstring)."""
    text, lines = snapshot.text, snapshot.lines
    if not text.strip():
        return Edit(Span(0, 0, len(lines), 0), markdown, "Insert the generated answer")
    eol_match = LINE_BREAK.search(text)
    eol = eol_match.group(0) if eol_match else "\n"
    body = markdown.split("\n")
    if body and body[0] == "---":
        close = body.index("---", 1)
        body = body[close + 1:]
    first = int(new_label(text))
    mapping: dict[str, str] = {}
    for line in body:
        m = _LABEL_DEF.match(line)
        if m and m[1] not in mapping:
            mapping[m[1]] = str(first + len(mapping))
    renumbered = []
    for line in body:
        m = _LABEL_DEF.match(line)
        if m and m[1] in mapping:
            line = f"[^{mapping[m[1]]}]: " + line[m.end():]
        else:
            e = _LABEL_END.search(line)
            if e and e[1] in mapping:
                line = line[:e.start()] + f"[^{mapping[e[1]]}]"
        renumbered.append(line)
    while renumbered and not renumbered[-1].strip():
        renumbered.pop()
    while renumbered and not renumbered[0].strip():
        renumbered.pop(0)
    block = eol.join(renumbered) + eol
    ends_with_break = text[-1] in "\r\n"
    last = lines[-1] if lines else ""
    lead = ("" if ends_with_break else eol) + (eol if last.strip() else "")
    if ends_with_break:
        at = (len(lines), 0)
    else:
        at = (len(lines) - 1, len(last))
    return Edit(Span(*at, *at), lead + block, "Insert the generated answer")
