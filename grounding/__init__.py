"""Grounding: check that every claim of an answer cites a verbatim, current, visible line of evidence.

The public Python API (SPEC §14)::

    import grounding

    report = grounding.verify(answer, root="path/to/workspace", context=hits)
    report.status, report.ok, report.diagnostics

    with grounding.Verifier("path/to/workspace") as verifier:   # open the index once
        for answer, hits in runs:
            verifier.verify(answer, context=hits)

``answer`` is the SPEC §5.2 JSON answer (a dict, JSON text or :class:`Answer`); ``context``
the units the model was shown (SPEC §6 log units). The report is :class:`Report`, the §9
draft object. Optional integrations: :mod:`grounding.langchain` (``grounding[langchain]``)
and ``grounding mcp`` (``grounding[mcp]``). ``grounding.cli`` is the command line; the checks
themselves live in :mod:`grounding_core`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import IndexReader, IndexView, Verifier, verify
    from .models import Answer, Claim, ContextLog, Diagnostic, ImageClaim, LinesUnit, Report, TextUnit, json_schema

_LAZY = {name: ".api" for name in ("IndexReader", "IndexView", "Verifier", "verify")} | {
    name: ".models" for name in ("Answer", "Claim", "ContextLog", "Diagnostic", "ImageClaim", "LinesUnit", "Report",
                                 "TextUnit", "json_schema")}
"""Public names and their modules, imported on first use: ``grounding check`` (the package's
CLI) never loads pydantic and the API (0.4-0.5 s of its start-up)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'grounding' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Answer", "Claim", "ContextLog", "Diagnostic", "ImageClaim", "IndexReader", "IndexView", "LinesUnit", "Report",
    "TextUnit", "Verifier", "json_schema", "verify",
]
