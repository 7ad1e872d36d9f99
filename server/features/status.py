"""Draft status for the editor: a ``grounding/status`` notification and a code lens (SPEC §7.5, §8).

After every new report of an open draft (``engine.on_reports``) the server sends the custom
notification ``grounding/status`` with::

    {"uri": str, "status": "answered" | "partial" | "abstain" | "conflict",
     "claims": int, "validClaims": int, "conflicts": int,   # field-conflict findings
     "outputTokens": int | null, "reserve": int | null,     # SPEC §8 answer wire, reserve
     "errors": int, "warnings": int,
     "memoryClaims": int, "validMemoryClaims": int}          # SPEC §11 memory claims

(the VS Code client's status bar reads it; a closed draft sends nothing). An opened document
that is not a draft gets ``{"uri": str, "status": null}`` once, so that a client showing a
"checking" state until the first status knows there is nothing to wait for. ``textDocument/
codeLens`` puts one lens on line 0 of each draft, titled like
``answered · 2/2 claims valid · 0 conflicts · 218/240 output tokens`` (``218 output tokens``
when the draft declares no reserve), whose command ``grounding.showContext [uri]`` returns the
compiled context summary. When the client supports ``workspace/codeLens/refresh`` the server
asks for a refresh after reports change (coalesced: at most one request in flight).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.capabilities import get_capability

from grounding_core.model import DraftReport, Severity
from server.features import memory as memory_feature
from server.features.actions import current_result

if TYPE_CHECKING:
    from server.app import DocumentEvent, GroundingServer, ServerState
    from server.engine import DraftResult

__all__ = ["STATUS_NOTIFICATION", "lens_title", "register", "status_params"]

logger = logging.getLogger(__name__)

STATUS_NOTIFICATION = "grounding/status"
SHOW_CONTEXT = "grounding.showContext"


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
        **memory_feature.status_fields(report),  # memory hook (SPEC §11): memoryClaims, validMemoryClaims
    }


def lens_title(report: DraftReport) -> str:
    """``answered · 2/2 claims valid · 0 conflicts · 218/240 output tokens``."""
    p = status_params("", report)
    conflicts = f"{p['conflicts']} conflict{'' if p['conflicts'] == 1 else 's'}"
    parts = [p["status"], f"{p['validClaims']}/{p['claims']} claims valid", conflicts]
    if p["outputTokens"] is not None:
        budget = f"/{p['reserve']}" if p["reserve"] is not None else ""
        parts.append(f"{p['outputTokens']}{budget} output tokens")
    return " · ".join(parts) + memory_feature.lens_suffix(report)


def register(server: GroundingServer, state: ServerState) -> None:
    engine = state.engine
    refresh: dict[str, Any] = {"task": None, "again": False}

    @engine.on_reports
    def on_report(uri: str, result: DraftResult | None) -> None:
        if result is not None:
            server.protocol.notify(STATUS_NOTIFICATION, status_params(uri, result.report))
        _request_refresh(server, refresh)

    @state.on_document
    async def on_document(ls: GroundingServer, event: DocumentEvent) -> None:
        if event.kind != "open":
            return
        await engine.indexed.wait()  # before it, the drafts globs are not known
        if engine.draft_rel(event.uri) is None:
            server.protocol.notify(STATUS_NOTIFICATION, {"uri": event.uri, "status": None})

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    async def code_lens(ls: GroundingServer, params: types.CodeLensParams) -> list[types.CodeLens] | None:
        uri = params.text_document.uri
        if engine.draft_rel(uri) is None:
            return None
        try:
            result = engine.result_for(uri) or await current_result(state, uri)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("code lens failed for %s", uri)
            return None
        if result is None:
            return None
        start = types.Position(line=0, character=0)
        return [types.CodeLens(
            range=types.Range(start=start, end=start),
            command=types.Command(title=lens_title(result.report), command=SHOW_CONTEXT,
                                  arguments=[uri]),
        )]


def _request_refresh(server: GroundingServer, refresh: dict[str, Any]) -> None:
    """Ask the client to re-request code lenses; one request in flight, later ones coalesce."""
    if not get_capability(server.client_capabilities, "workspace.code_lens.refresh_support", False):
        return
    task = refresh["task"]
    if task is not None and not task.done():
        refresh["again"] = True
        return

    async def run() -> None:
        while True:
            refresh["again"] = False
            try:
                await server.workspace_code_lens_refresh_async(None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a client that refuses: lenses update on its next request
                logger.info("workspace/codeLens/refresh failed: %s", exc)
                return
            if not refresh["again"]:
                return

    refresh["task"] = asyncio.get_running_loop().create_task(run())
