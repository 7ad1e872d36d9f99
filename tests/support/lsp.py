"""The client factory: the real server (``python -m server``) over stdio, driven by a pytest-lsp
client that records everything the server sends (:class:`tests.support.recorder.Recorder`).

Profiles (:func:`capabilities`), with the capabilities pytest-lsp captured from real editors:

- ``visual-studio-code`` — UTF-16 positions, ``documentChanges`` edits, code-lens refresh,
  dynamic file-watcher registration;
- ``neovim`` — UTF-8 positions, plain ``changes`` edits;
- ``pull`` — VS Code plus pull diagnostics with refresh support (LSP 3.17);
- ``minimal`` — pushed diagnostics, work-done progress, Markdown hovers, no dynamic file
  watching (every evidence change the server sees comes from its own watcher).

The client answers what an editor answers: ``client/registerCapability`` and the
``workspace/*/refresh`` requests with null, ``workspace/applyEdit`` with ``applied: true``
(the test applies the edit itself), ``window/workDoneProgress/create`` with null.

:func:`start` / :func:`stop` and the :func:`lsp_session` context manager open and close a
session; a server that does not exit within :data:`WAIT_SECONDS` of ``shutdown`` + ``exit``
is killed, so a failing test never hangs the run. Every session is rooted in a folder the
test built (:mod:`tests.support.workspace`), never the checkout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from .recorder import STATUS, WAIT_SECONDS, Recorder

__all__ = ["PROFILES", "REPO_ROOT", "SERVER_COMMAND", "SERVER_ENV", "RecordingClient", "capabilities",
           "encoding_of", "lsp_session", "make_client", "names_of", "open_document", "replace_document", "start",
           "stop"]

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_COMMAND = [sys.executable, "-m", "server"]
SERVER_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
}
"""Environment for server subprocesses: this checkout first on ``PYTHONPATH``."""

PROFILES = {"visual-studio-code": "utf-16", "neovim": "utf-8"}
"""The editor profiles -> the position encoding the server negotiates with each."""


def capabilities(profile: str) -> types.ClientCapabilities:
    """The client capabilities of one profile (see the module docstring)."""
    if profile == "pull":
        caps = client_capabilities("visual-studio-code")
        assert caps.text_document is not None and caps.workspace is not None
        caps.text_document.diagnostic = types.DiagnosticClientCapabilities(
            dynamic_registration=False, related_document_support=False)
        caps.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
        return caps
    if profile == "minimal":
        return types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=True),
            text_document=types.TextDocumentClientCapabilities(
                publish_diagnostics=types.PublishDiagnosticsClientCapabilities(related_information=True),
                hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
            ),
        )
    return client_capabilities(profile)


class RecordingClient(LanguageClient):
    """A pytest-lsp client whose :attr:`recorder` sees every message from the server.

    After :func:`start`: ``initialize_result`` (the server's answer), ``root`` (the workspace
    folder) and ``encoding`` (the negotiated position encoding, ``"utf-16"`` ...).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = Recorder()
        self.initialize_result: types.InitializeResult | None = None
        self.root = Path()
        self.encoding = "utf-16"
        self.registrations: list[types.Registration] = []


def _recording(method: str, default: Any = None) -> Any:
    def handler(ls: RecordingClient, params: Any) -> Any:
        if default is not None:
            default(ls, params)  # pytest-lsp's own bookkeeping (ls.diagnostics, ls.messages ...)
        ls.recorder.record(method, params)
        return None

    return handler


def _apply_edit(ls: RecordingClient, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
    ls.recorder.record(types.WORKSPACE_APPLY_EDIT, params)
    return types.ApplyWorkspaceEditResult(applied=True)


def _register(ls: RecordingClient, params: types.RegistrationParams) -> None:
    ls.registrations.extend(params.registrations)
    ls.recorder.record(types.CLIENT_REGISTER_CAPABILITY, params)


def _unregister(ls: RecordingClient, params: types.UnregistrationParams) -> None:
    gone = {u.id for u in params.unregisterations}
    ls.registrations[:] = [r for r in ls.registrations if r.id not in gone]


RECORDED = (
    types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, types.WORKSPACE_DIAGNOSTIC_REFRESH, types.PROGRESS,
    types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE,
)
"""Methods pytest-lsp already handles; the recorder sees them too."""
ANSWERED_NULL = (
    types.WORKSPACE_CODE_LENS_REFRESH, types.WORKSPACE_SEMANTIC_TOKENS_REFRESH, types.WORKSPACE_INLAY_HINT_REFRESH,
    types.WORKSPACE_INLINE_VALUE_REFRESH, types.WORKSPACE_FOLDING_RANGE_REFRESH, STATUS,
)
"""Requests an editor answers with null (and the status notification): recorded."""


def make_client() -> RecordingClient:
    """A :class:`RecordingClient` with pytest-lsp's default handlers plus the recorder."""
    client = RecordingClient(converter_factory=default_converter)
    features = dict(DEFAULT_CLIENT_FEATURES)
    for method in RECORDED:
        features[method] = _recording(method, DEFAULT_CLIENT_FEATURES.get(method))
    for method in ANSWERED_NULL:
        features[method] = _recording(method)
    features[types.WORKSPACE_APPLY_EDIT] = _apply_edit
    features[types.CLIENT_REGISTER_CAPABILITY] = _register
    features[types.CLIENT_UNREGISTER_CAPABILITY] = _unregister
    register_lsp_features(client, features)
    return client


def encoding_of(client: RecordingClient) -> str:
    """The negotiated position encoding as a plain string."""
    return client.encoding


async def start(root: Path | None, profile: str = "visual-studio-code", *, env: dict[str, str] | None = None,
                command: list[str] | None = None, editor_capabilities: types.ClientCapabilities | None = None,
                **initialize: Any) -> RecordingClient:
    """Start the server, ``initialize`` it on the workspace folder ``root`` (None: no folder)
    with the capabilities of ``profile`` (or ``editor_capabilities``, for an editor that has no
    profile) and send ``initialized``. ``command`` replaces ``python -m server`` and ``env``
    adds to its environment; extra keyword arguments go to ``InitializeParams``
    (``initialization_options=...``, ``client_info=...``).
    """
    config = ClientServerConfig(server_command=command or SERVER_COMMAND, server_env={**SERVER_ENV, **(env or {})},
                                client_factory=make_client)
    client = await config.start()
    assert isinstance(client, RecordingClient)
    try:
        folders = [types.WorkspaceFolder(uri=root.as_uri(), name=root.name)] if root is not None else None
        caps = editor_capabilities if editor_capabilities is not None else capabilities(profile)
        params = types.InitializeParams(capabilities=caps, root_uri=root.as_uri() if root else None,
                                        workspace_folders=folders, **initialize)
        result = await asyncio.wait_for(client.initialize_session(params), WAIT_SECONDS)
    except BaseException:
        await stop(client)
        raise
    client.initialize_result = result
    client.root = root if root is not None else Path()
    encoding = result.capabilities.position_encoding
    client.encoding = str(getattr(encoding, "value", encoding or "utf-16"))
    return client


async def stop(client: LanguageClient) -> int | None:
    """``shutdown`` + ``exit``, or kill a server that does not end; returns its exit code."""
    process = client._server
    if process is not None and process.returncode is None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), WAIT_SECONDS)
        if process.returncode is None:
            process.kill()
    await client.stop()
    return process.returncode if process is not None else None


@contextlib.asynccontextmanager
async def lsp_session(root: Path | None, profile: str = "visual-studio-code",
                      **options: Any) -> AsyncIterator[RecordingClient]:
    """Open a session for an ``async with`` block: :func:`start`, then :func:`stop` (also when
    the test failed).
    """
    client = await start(root, profile, **options)
    try:
        yield client
    finally:
        await stop(client)


# ------------------------------------------------------------------ editor actions


def open_document(client: LanguageClient, uri: str, text: str, version: int = 1, language: str = "markdown") -> None:
    """``textDocument/didOpen`` with ``text``."""
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)))


def replace_document(client: LanguageClient, uri: str, text: str, version: int) -> None:
    """One incremental ``didChange`` whose range covers everything (how editors send a paste)."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=0, character=0),
                              end=types.Position(line=10_000, character=0)),
            text=text)]))


def names_of(diagnostics: Sequence[types.Diagnostic]) -> list[str]:
    """The stable names (``data.name``) of diagnostics, in order."""
    return [d.data["name"] if isinstance(d.data, dict) else str(d.code) for d in diagnostics]
