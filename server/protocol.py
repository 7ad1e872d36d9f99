"""Grounding's own protocol on top of LSP: custom methods, the read-only version scheme and
command arguments (SPEC §10). The VS Code client (``vscode-client/``) speaks exactly this.

Custom requests and notifications:

``grounding/documentText`` ``{uri}`` -> ``{uri, version, text}`` or null
    The server's current text of an open document (the e2e tests use it to check that
    incremental sync kept the server's text equal to the editor's).
``grounding/versionText`` ``{uri}`` -> ``{uri, text, title, readOnly: true, docId, version, path,
languageId}`` or null
    The indexed text (BOM removed) of the version a ``grounding-evidence:`` URI names; a client
    registers a read-only content provider for the scheme and fills it from this request.
``grounding/status`` (notification, server -> client)
    A draft's status after each check (shape in ``server/features/status.py``).

Commands (``workspace/executeCommand``) are listed in :data:`COMMANDS` and documented in
``server/features/commands.py`` (the memory commands in ``server/features/memory.py``). Each
takes one object; clients may send it as ``arguments: [{...}]`` (VS Code sends a list) or, for
the commands that only need a document, as ``[uri]`` (the code lens does). Invalid arguments
are a JSON-RPC ``InvalidParams`` error.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote as percent_encode
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

__all__ = ["COMMANDS", "DOCUMENT_TEXT", "STATUS_NOTIFICATION", "VERSION_SCHEME", "VERSION_TEXT", "command_object",
           "markup_kind", "param", "parse_version_uri", "uri_argument", "version_uri"]

DOCUMENT_TEXT = "grounding/documentText"
VERSION_TEXT = "grounding/versionText"
STATUS_NOTIFICATION = "grounding/status"
VERSION_SCHEME = "grounding-evidence"
"""URI scheme of read-only evidence versions: ``grounding-evidence:/DOC_ID@VERSION``."""

COMMANDS = (
    "grounding.reindex",
    "grounding.showConflicts",
    "grounding.insertCitation",
    "grounding.draftAnswer",
    "grounding.fixAll",
    "grounding.showContext",
    "grounding.rememberMemory",
    "grounding.approveMemory",
    "grounding.forgetMemory",
    "grounding.showReferences",
)


def version_uri(doc_id: str, version: int) -> str:
    """The read-only document URI of one indexed version: ``grounding-evidence:/DOC_ID@VERSION``.

    ``doc_id`` is percent-encoded as one path segment (``/`` -> ``%2F``, non-ASCII as UTF-8),
    so ``events/open-day`` version 1 is ``grounding-evidence:/events%2Fopen-day@1``. A doc_id
    never holds ``@`` (SPEC §3), so the last ``@`` separates the version.
    """
    return f"{VERSION_SCHEME}:/{percent_encode(doc_id, safe='')}@{version}"


def parse_version_uri(uri: str) -> tuple[str, int] | None:
    """``(doc_id, version)`` of a :func:`version_uri`, or None for any other URI.

    Tolerant of clients that re-encode the URI (``%40`` for ``@``, ``/`` left unencoded, an
    authority ``//``): the path is decoded first, then split at its last ``@``.
    """
    scheme, sep, rest = uri.partition(":")
    if not sep or scheme.lower() != VERSION_SCHEME:
        return None
    rest = rest.split("?", 1)[0].split("#", 1)[0]
    path = unquote(rest).lstrip("/")
    doc_id, at, version = path.rpartition("@")
    if not at or not doc_id or not re.fullmatch(r"[1-9][0-9]*", version):
        return None
    return doc_id, int(version)


def param(params: Any, name: str) -> Any:
    """One field of a custom request's params (a dict, or pygls's object for unknown methods)."""
    return params.get(name) if isinstance(params, dict) else getattr(params, name, None)


def command_object(args: tuple[Any, ...], positional: tuple[str, ...] = ()) -> dict[str, Any]:
    """A command's argument object from ``[{...}]``, ``[[{...}]]``, ``{...}`` or positionals.

    Raises ``JsonRpcInvalidParams`` for more arguments than the command takes.
    """
    if len(args) == 1 and isinstance(args[0], list):
        args = tuple(args[0])
    if len(args) == 1 and isinstance(args[0], dict):
        return args[0]
    if not args:
        return {}
    if len(args) <= len(positional):
        return dict(zip(positional, args, strict=False))
    if len(args) == 1:
        raise JsonRpcInvalidParams(f"expected one argument object ({{...}}), got {_json_kind(args[0])}")
    raise JsonRpcInvalidParams(f"expected one argument object, got {len(args)} arguments")


def _json_kind(value: Any) -> str:
    """How a JSON value is named in a message: ``null``, ``a string``, ``a number``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, (list, tuple)) else type(value).__name__


def uri_argument(obj: dict[str, Any], required: bool = True) -> str | None:
    """The ``uri`` of a command's arguments; raises ``JsonRpcInvalidParams`` when it is bad."""
    uri = obj.get("uri")
    if uri is None and not required:
        return None
    if not isinstance(uri, str) or not uri:
        raise JsonRpcInvalidParams("'uri' must be a document URI")
    return uri


def markup_kind(capabilities: types.ClientCapabilities) -> types.MarkupKind:
    """Markdown hovers unless the client lists hover formats without Markdown."""
    hover = capabilities.text_document.hover if capabilities.text_document else None
    formats = hover.content_format if hover is not None else None
    if formats and types.MarkupKind.Markdown not in formats:
        return types.MarkupKind.PlainText
    return types.MarkupKind.Markdown
