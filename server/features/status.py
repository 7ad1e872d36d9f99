"""Draft status for the editor: a ``grounding/status`` notification and a code lens (SPEC §7.5, §8).

After every new result of an open draft (:func:`on_result`) the server sends the custom
notification ``grounding/status`` with::

    {"uri": str, "status": "answered" | "partial" | "abstain" | "conflict",
     "claims": int, "validClaims": int, "conflicts": int,   # field-conflict findings
     "outputTokens": int | null, "reserve": int | null,     # SPEC §8 answer wire, reserve
     "errors": int, "warnings": int,
     "memoryClaims": int, "validMemoryClaims": int}          # SPEC §11 memory claims

(the VS Code client's status bar reads it; a closed draft sends nothing). An opened document
that is not a draft gets ``{"uri": str, "status": null}`` once, so that a client showing a
"checking" state until the first status knows there is nothing to wait for. ``textDocument/
codeLens`` puts one lens on line 0 of each draft, titled like ``answered · 2/2 claims valid ·
0 conflicts · 218/240 output tokens`` (``218 output tokens`` when the draft declares no
reserve; `` · N memory claims`` when it cites memory), whose command ``grounding.showContext
[uri]`` returns the compiled context summary. When the client supports
``workspace/codeLens/refresh`` the server asks for a refresh after results change (coalesced:
at most one request in flight).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types

from grounding_core.model import DraftReport, Severity
from server.features import memory
from server.session import DraftResult, Session

__all__ = ["SHOW_CONTEXT", "STATUS_NOTIFICATION", "code_lens", "lens_title", "on_result", "opened",
           "status_params"]

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


def on_result(session: Session, result: DraftResult) -> None:
    """A new fresh result of an open draft: tell the status bar, refresh the code lenses."""
    session.client.notify(STATUS_NOTIFICATION, status_params(result.uri, result.report))
    request_refresh(session)


def opened(session: Session, uri: str) -> None:
    """A document was opened: once the drafts globs are known, a non-draft gets status null."""
    session.tasks.start(f"status:opened:{uri}", _opened(session, uri))


async def _opened(session: Session, uri: str) -> None:
    await session.ready.wait()
    if session.document(uri) is not None and session.draft_rel(uri) is None:
        session.client.notify(STATUS_NOTIFICATION, {"uri": uri, "status": None})


async def code_lens(session: Session, params: types.CodeLensParams) -> list[types.CodeLens] | None:
    """``textDocument/codeLens``: one lens on line 0 of a draft (title in the module docstring)."""
    uri = params.text_document.uri
    await session.ready.wait()
    if session.draft_rel(uri) is None:
        return None
    result = session.fresh_result(uri) or await session.current_result(uri)
    if result is None:
        return None
    start = types.Position(line=0, character=0)
    return [types.CodeLens(range=types.Range(start=start, end=start),
                           command=types.Command(title=lens_title(result.report), command=SHOW_CONTEXT,
                                                 arguments=[uri]))]


def request_refresh(session: Session) -> None:
    """Ask the client to re-request code lenses; one request in flight, later ones coalesce."""
    if not session.capability("workspace.code_lens.refresh_support", False):
        return
    if session.tasks.running(_REFRESH) is not None:
        session.feature_state[_REFRESH] = True
        return
    session.tasks.start(_REFRESH, _refresh(session))


async def _refresh(session: Session) -> None:
    while True:
        session.feature_state[_REFRESH] = False
        try:
            await session.client.refresh_code_lenses()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a client that refuses: lenses update on its next request
            logger.info("workspace/codeLens/refresh failed: %s", exc)
            return
        if not session.feature_state.get(_REFRESH):
            return
