"""Draft status for the editor: a ``grounding/status`` notification and a code lens (SPEC §7.5, §8).

After every new result of an open draft (:func:`on_result`) the server sends the custom
notification ``grounding/status`` with::

    {"uri": str, "status": "answered" | "partial" | "abstain" | "conflict",
     "claims": int, "validClaims": int, "conflicts": int,   # field-conflict findings
     "outputTokens": int | null, "reserve": int | null,     # SPEC §8 answer wire, reserve
     "errors": int, "warnings": int,
     "indexComplete": bool,   # false: a query context ranked an index still building its
                              # full-text rows ("still indexing"; a later result may differ)
     "memoryClaims": int, "validMemoryClaims": int,         # SPEC §11 memory claims
     "index": {"backend": "sqlite" | "postgresql", "location": str,  # URL without password
               "role": "local" | "writer" | "reader",
               "fallback": str | null}}   # set when the shared index was unreachable at start
                                          # and the local SQLite index is used instead

(the VS Code client's status bar reads it; a closed draft sends nothing). An opened document
that is not a draft gets ``{"uri": str, "status": null}`` once, so that a client showing a
"checking" state until the first status knows there is nothing to wait for. ``textDocument/
codeLens`` puts one lens on line 0 of each draft, titled like
``answered · 2/2 claims valid · 0 conflicts · 218/240 output tokens`` (``218 output tokens``
when the draft declares no reserve; `` · N memory claims`` when it cites memory), whose
command ``grounding.showContext [uri]`` returns the compiled context summary.

The lens and the squiggles come from **one result**: the result whose diagnostics the client
was last given (pushed, or answered to a pull) is the draft's *shown* result
(:func:`shown`), and the lens is made from it — never from a newer check the client has no
squiggles for yet, and never by waiting for one while the writer types (a lens request that
waits for a check makes VS Code's adaptive code-lens debounce grow to seconds). In the same
step as the publication the server asks for ``workspace/codeLens/refresh`` (and
``workspace/inlayHint/refresh``) when the client supports it (coalesced: at most one request
of each in flight), so the lens follows the squiggles at once. Only before a draft's first
publication does a lens request wait for its check. Evidence files get reference lenses
(``server/features/references.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lsprotocol import types

from grounding_core.model import DraftReport, Severity
from server.features import memory, references
from server.session import DraftResult, Session

__all__ = ["SHOW_CONTEXT", "STATUS_NOTIFICATION", "closed", "code_lens", "lens_title", "on_result", "opened",
           "request_refresh", "shown", "shown_or_first", "shown_results", "status_params"]

logger = logging.getLogger(__name__)

STATUS_NOTIFICATION = "grounding/status"
SHOW_CONTEXT = "grounding.showContext"
CODE_LENS_OPTIONS = types.CodeLensOptions(resolve_provider=False)
_REFRESH = "status:code-lens-refresh"


def status_params(uri: str, report: DraftReport) -> dict[str, Any]:
    """The ``grounding/status`` params of one report (shape in the module docstring)."""
    severities = [f.effective_severity for f in report.findings]
    return {
        "uri": uri,
        "status": report.status.value,
        "claims": len(report.claims),
        "validClaims": len(report.valid_claims),
        "conflicts": sum(1 for f in report.findings if f.name == "field-conflict"),
        "outputTokens": report.output_tokens,
        "reserve": report.output_reserve,
        "errors": severities.count(Severity.ERROR),
        "warnings": severities.count(Severity.WARNING),
        "indexComplete": report.index_complete,
        **memory.status_fields(report),  # memory hook (SPEC §11)
    }


def lens_title(report: DraftReport) -> str:
    """``answered · 2/2 claims valid · 0 conflicts · 218/240 output tokens``."""
    p = status_params("", report)
    conflicts = f"{p['conflicts']} conflict{'' if p['conflicts'] == 1 else 's'}"
    parts = [p["status"], f"{p['validClaims']}/{p['claims']} claims valid", conflicts]
    if p["outputTokens"] is not None:
        budget = f"/{p['reserve']}" if p["reserve"] is not None else ""
        parts.append(f"{p['outputTokens']}{budget} output tokens")
    return " · ".join(parts) + memory.lens_suffix(report)


_SHOWN = "status:shown"


def on_result(session: Session, result: DraftResult) -> None:
    """The client was just given ``result``'s diagnostics: it becomes the draft's shown result;
    tell the status bar and, in the same step, refresh the code lenses and inlay hints.
    """
    shown_results(session)[result.uri] = result
    params = status_params(result.uri, result.report)
    if session.index_status:
        params["index"] = dict(session.index_status)
    session.client.notify(STATUS_NOTIFICATION, params)
    request_refresh(session)


def shown_results(session: Session) -> dict[str, DraftResult]:
    """The shown result of each open draft (loop-owned; see the module docstring)."""
    found: dict[str, DraftResult] = session.feature_state.setdefault(_SHOWN, {})
    return found


def shown(session: Session, uri: str) -> DraftResult | None:
    """The result whose diagnostics the client has for the open draft ``uri``, if any."""
    return shown_results(session).get(uri)


async def shown_or_first(session: Session, uri: str) -> DraftResult | None:
    """The shown result of ``uri``; before its first publication, its first check's result."""
    await session.ready.wait()
    if session.draft_rel(uri) is None:
        return None
    return shown(session, uri) or session.fresh_result(uri) or await session.current_result(uri)


def closed(session: Session, uri: str) -> None:
    """The draft ``uri`` was closed: forget its shown result."""
    shown_results(session).pop(uri, None)


def opened(session: Session, uri: str) -> None:
    """A document was opened: once the drafts globs are known, a non-draft gets status null."""
    session.tasks.start(f"status:opened:{uri}", _opened(session, uri))


async def _opened(session: Session, uri: str) -> None:
    await session.ready.wait()
    if session.document(uri) is not None and session.draft_rel(uri) is None:
        session.client.notify(STATUS_NOTIFICATION, {"uri": uri, "status": None})


async def code_lens(session: Session, params: types.CodeLensParams) -> list[types.CodeLens] | None:
    """``textDocument/codeLens``: one lens on line 0 of a draft, made from its shown result
    (module docstring); on an evidence file, the reference lenses of its cited lines.
    """
    uri = params.text_document.uri
    await session.ready.wait()
    if session.draft_rel(uri) is None:
        return await references.code_lens(session, params)
    result = await shown_or_first(session, uri)
    if result is None:
        return None
    start = types.Position(line=0, character=0)
    return [types.CodeLens(range=types.Range(start=start, end=start),
                           command=types.Command(title=lens_title(result.report), command=SHOW_CONTEXT,
                                                 arguments=[uri]))]


def request_refresh(session: Session) -> None:
    """Ask the client to re-request code lenses and inlay hints (each when it supports the
    refresh request); one request of each in flight, later ones coalesce.
    """
    if session.capability("workspace.code_lens.refresh_support", False):
        _coalesced(session, _REFRESH, session.client.refresh_code_lenses)
    if session.capability("workspace.inlay_hint.refresh_support", False):
        _coalesced(session, _INLAY_REFRESH, session.client.refresh_inlay_hints)


_INLAY_REFRESH = "status:inlay-hint-refresh"


def _coalesced(session: Session, name: str, send: Callable[[], Awaitable[None]]) -> None:
    if session.tasks.running(name) is not None:
        session.feature_state[name] = True
        return
    session.feature_state[name] = False
    session.tasks.start(name, _refresh(session, name, send))


async def _refresh(session: Session, name: str, send: Callable[[], Awaitable[None]]) -> None:
    while True:
        session.feature_state[name] = False
        try:
            await send()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a client that refuses: it updates on its next request
            logger.info("%s refresh failed: %s", name, exc)
            return
        if not session.feature_state.get(name):
            return
