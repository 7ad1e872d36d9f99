"""Server-side commands (``workspace/executeCommand``, SPEC §10).

Arguments: each command takes one object (``server/protocol.py``: ``[{...}]``, ``{...}``, or
``[uri]`` for the commands that only need a document). Results are JSON objects; a
``message`` key is a sentence for the user.

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
                            (``grounding_core.edits.append_answer``); waits for the
                            background full-text rows first (at most
                            ``SEARCH_WAIT_SECONDS``, else ``reason: still_indexing``)
``grounding.fixAll``        ``{uri}`` -> applies every safe fix (``applied, fixes``)
``grounding.showContext``   ``{uri}`` | ``uri`` -> the draft's context: for a ``query``
                            context the compiled summary (kept/skipped units, tokens)
==========================  ==========================================================

Invalid arguments are a JSON-RPC ``InvalidParams`` error; a draft that is not open is read
from disk. Heavy work runs in worker threads on the captured index view; edits go through
``workspace/applyEdit`` (when the client cannot apply edits, the ``WorkspaceEdit`` is returned
under ``edit``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from grounding_core.budget import BudgetError
from grounding_core.candidates import citation_candidates
from grounding_core.check import answer_from, check_text, compile_query_context, resolve_visibility
from grounding_core.context import DEFAULT_LIMIT, DEFAULT_RESERVE
from grounding_core.drafts import ContextUnitSpec
from grounding_core.edits import append_answer, citation_edits, fix_all_edits, sentence_at
from grounding_core.model import Edit
from server.convert import lsp_workspace_edit
from server.documents import DocumentSnapshot
from server.features import workspace
from server.protocol import COMMANDS, command_object, uri_argument
from server.session import DraftResult, IndexView, ResultKey, Session

SEARCH_WAIT_SECONDS = 20.0
"""How long ``grounding.draftAnswer`` waits for the background full-text build before it says
"still indexing" and inserts nothing (a query context ranked on part of the rows could abstain
where ``grounding answer`` answers)."""

__all__ = ["COMMANDS", "draft_answer", "fix_all", "insert_citation", "reindex", "show_conflicts",
           "show_context"]


async def _ready(session: Session) -> IndexView:
    await session.ready.wait()
    view = session.current_view()
    if session.workspace is None or view is None:
        raise JsonRpcInvalidParams("no workspace folder is open")
    return view


async def _result_of(session: Session, uri: str) -> DraftResult:
    """The current check of ``uri``: the open buffer, else the file on disk."""
    result = await session.current_result(uri)
    if result is not None:
        return result
    rel = session.draft_rel(uri)
    view = session.current_view()
    if rel is None or view is None:
        raise JsonRpcInvalidParams(f"{uri} is not a Grounding draft (see the drafts globs)")
    document = await _from_disk(session, view, uri, rel)
    checked = await session.readers.run(check_text, document.text, rel, view.snapshot, view.config, view.today,
                                        view.read_text)
    key = ResultKey(document.version, document.text_hash, view.generation)
    return DraftResult(uri, key, document, checked.draft, checked.report, rel)


async def _from_disk(session: Session, view: IndexView, uri: str, rel: str) -> DocumentSnapshot:
    """A draft that is not open, read from disk (UTF-8 inside the workspace root)."""
    text = await session.readers.run(view.read_text, rel)
    if text is None:
        raise JsonRpcInvalidParams(f"cannot read {uri}: not a UTF-8 file inside the workspace")
    return DocumentSnapshot.of(uri, None, text, session.codec)


async def _apply(session: Session, document: DocumentSnapshot, edits: Sequence[Edit], label: str) -> dict[str, Any]:
    edit = lsp_workspace_edit(document.uri, document.version, document.lines, edits, document.codec,
                              bool(session.capability("workspace.workspace_edit.document_changes", False)))
    if not session.capability("workspace.apply_edit", False):
        return {"applied": False, "edit": session.client.unstructure(edit)}
    response = await session.client.apply_edit(edit, label)
    out: dict[str, Any] = {"applied": bool(response.applied)}
    if not response.applied and response.failure_reason:
        out["failureReason"] = response.failure_reason
    return out


# ------------------------------------------------------------------------------ commands


async def reindex(session: Session, *args: Any) -> dict[str, Any]:
    await _ready(session)
    workspace.request_reindex(session)
    await workspace.wait_reindexed(session)
    view = await _ready(session)
    return await session.readers.run(_summary, view)


def _summary(view: IndexView) -> dict[str, Any]:
    stats = view.snapshot.stats(view.today)
    return {"documents": stats.documents, "versions": stats.versions, "active": stats.active_documents,
            "conflicts": len(view.snapshot.conflicting_keys(view.today)), "events": view.snapshot.seq}


async def show_conflicts(session: Session, *args: Any) -> list[dict[str, Any]]:
    view = await _ready(session)
    return await session.readers.run(_conflicts, view)


def _conflicts(view: IndexView) -> list[dict[str, Any]]:
    snapshot, today, display = view.snapshot, view.today, view.config.evidence_display
    return [{
        "subject": subject, "field": field,
        "values": [{"value": kl.value, "doc_id": kl.doc_id, "version": kl.version, "line": kl.line,
                    "path": display(kl.path)} for kl in snapshot.key_lines((subject, field), today)],
    } for subject, field in snapshot.conflicting_keys(today)]


async def insert_citation(session: Session, *args: Any) -> dict[str, Any]:
    obj = command_object(args, ("uri", "position"))
    uri = uri_argument(obj)
    assert uri is not None
    try:
        position = types.Position(line=int(obj["position"]["line"]), character=int(obj["position"]["character"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise JsonRpcInvalidParams("'position' must be {line, character}") from exc
    view = await _ready(session)
    result = await _result_of(session, uri)
    document = result.document
    line, column = document.codec.core_position(position, document.lines)
    sentence = sentence_at(result.draft, line, column)
    if sentence is None:
        return {"applied": False, "message": "No sentence at the cursor to cite."}

    def best() -> Any:
        visibility = resolve_visibility(result.draft, view.snapshot, view.config, view.today, view.read_text)
        found = citation_candidates(view.snapshot, sentence.text, view.today, visibility, 1,
                                    [name for name, _span in result.draft.fields])
        return found[0] if found else None

    candidate = await session.readers.run(best)
    if candidate is None:
        return {"applied": False, "message": "No active evidence line matches this sentence."}
    edits, label = citation_edits(document.text, document.lines, sentence.span, candidate.citation,
                                  candidate.sha256, candidate.text)
    out = await _apply(session, document, edits, f"Cite {candidate.id}")
    out.update(citation=candidate.id, label=label, line=candidate.text, reasons=list(candidate.reasons))
    if out["applied"]:
        out["message"] = f"Cited {candidate.id} as [^{label}]."
    return out


async def draft_answer(session: Session, *args: Any) -> dict[str, Any]:
    obj = command_object(args)
    uri = uri_argument(obj, required=False)
    if uri is not None:  # question hook (SPEC §13): the open draft's question, fields, subject
        await _ready(session)
        obj = {**_draft_request(await _result_of(session, uri)), **{k: v for k, v in obj.items() if v is not None}}
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
    view = await _ready(session)
    if not view.snapshot.search_complete:  # the context is ranked by full-text search (SPEC §8)
        if not await workspace.full_text_built(session, SEARCH_WAIT_SECONDS):
            return {"applied": False, "status": None, "reason": "still_indexing",
                    "message": "Grounding is still indexing the evidence folder; draft the answer again in a moment."}
        view = await _ready(session)
    try:
        answer = await session.readers.run(answer_from, view.snapshot, view.config, view.today, question.strip(),
                                           list(fields), subject, budget["limit"], budget["reserve"])
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
        session.client.show_message(types.MessageType.Warning, rejected)
        return out
    if uri is None:
        out.update(applied=False, markdown=markdown)
        return out
    rel = session.draft_rel(uri)
    if rel is None:
        raise JsonRpcInvalidParams(f"{uri} is not a Grounding draft (see the drafts globs)")
    document = session.document(uri) or await _from_disk(session, view, uri, rel)
    inserted = append_answer(document.text, document.lines, markdown)
    out.update(await _apply(session, document, [inserted], "Grounding: draft an answer"))
    out["markdown"] = inserted.new_text
    if out["applied"]:
        n = len(out["claims"])
        out["message"] = f"Inserted an answer (status: {out['status']}) with {n} claim{'' if n == 1 else 's'}."
    return out


def _draft_request(result: DraftResult) -> dict[str, Any]:
    """The question, fields and subject of a checked draft's front matter (those it has)."""
    draft = result.draft
    out: dict[str, Any] = {}
    if draft.question:
        out["question"] = draft.question
    if draft.fields:
        out["fields"] = [name for name, _ in draft.fields]
    if draft.subject:
        out["subject"] = draft.subject
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


async def fix_all(session: Session, *args: Any) -> dict[str, Any]:
    uri = uri_argument(command_object(args, ("uri",)))
    assert uri is not None
    await _ready(session)
    result = await _result_of(session, uri)
    edits = fix_all_edits(result.report.findings)
    if not edits:
        return {"applied": False, "fixes": 0, "message": "No safe fixes to apply."}
    out = await _apply(session, result.document, edits, "Grounding: fix all citations")
    out["fixes"] = len(edits)
    if out["applied"]:
        out["message"] = f"Applied {len(edits)} fix{'' if len(edits) == 1 else 'es'}."
    return out


async def show_context(session: Session, *args: Any) -> dict[str, Any]:
    uri = uri_argument(command_object(args, ("uri",)))
    assert uri is not None
    view = await _ready(session)
    result = await _result_of(session, uri)
    draft, report = result.draft, result.report
    out: dict[str, Any] = {
        "question": draft.question, "fields": [name for name, _ in draft.fields],
        "status": report.status.value, "outputTokens": report.output_tokens, "reserve": report.output_reserve,
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
        compiled = await session.readers.run(compile_query_context, view.snapshot, view.config, spec,
                                             draft.question or "", view.today)
        out["context"] = compiled.summary()
    return out


def _unit_text(unit: ContextUnitSpec) -> str:
    if unit.text is not None:
        return f"{unit.doc_id}@{unit.version} (text)"
    if unit.start is None:
        return f"{unit.doc_id}@{unit.version}"
    return f"{unit.doc_id}@{unit.version}:{unit.start}-{unit.end}"
