"""A language-server session in this process, for calling feature functions directly.

:func:`in_process` builds a :class:`server.session.Session` exactly as ``initialize`` does
(``Session.attach`` with a :class:`server.documents.GroundingWorkspace` negotiated from the
profile's capabilities), runs the real ``initialized`` (settings, config, the SQLite index,
the watcher, the initial scan), waits for the index, and yields an :class:`InProcess`. Its
client port, :class:`RecordingPort`, records every message the session sends into the same
:class:`~tests.support.recorder.Recorder` the stdio harness uses, and answers what an editor
answers (``applyEdit``: applied; ``configuration``: the given settings).

Documents change the way pygls changes them (``put_text_document`` /
``update_text_document`` on the session's workspace) before the text-sync feature function
runs, as the real handlers do.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import default_converter

from server.documents import GroundingWorkspace
from server.features import diagnostics, workspace
from server.positions import negotiate
from server.session import Session

from .lsp import capabilities
from .recorder import Recorder

__all__ = ["InProcess", "RecordingPort", "in_process"]


class RecordingPort:
    """The session's client port for in-process tests (see the module docstring)."""

    def __init__(self, recorder: Recorder, settings: dict[str, Any] | None = None) -> None:
        self.recorder = recorder
        self.settings = settings
        self.choice: str | None = None
        """What :meth:`show_message_request` answers (a test sets it)."""
        self._converter = default_converter()

    def publish_diagnostics(self, uri: str, version: int | None, diagnostics: Sequence[types.Diagnostic]) -> None:
        self.recorder.record(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, types.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=list(diagnostics)))

    def prepare_diagnostics(self, uri: str, version: int | None, diagnostics: Sequence[types.Diagnostic],
                            pause: Callable[[], object] | None = None) -> types.PublishDiagnosticsParams:
        return types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=list(diagnostics))

    def send_prepared(self, prepared: Any, bulk: bool = False) -> None:
        self.recorder.record(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, prepared)

    def notify(self, method: str, params: Any) -> None:
        self.recorder.record(method, params)

    def show_message(self, kind: types.MessageType, message: str) -> None:
        self.recorder.record(types.WINDOW_SHOW_MESSAGE, types.ShowMessageParams(kind, message))

    def log_message(self, kind: types.MessageType, message: str) -> None:
        self.recorder.record(types.WINDOW_LOG_MESSAGE, types.LogMessageParams(kind, message))

    async def show_message_request(self, kind: types.MessageType, message: str,
                                   choices: Sequence[str]) -> str | None:
        """Records the question and answers :attr:`choice` (None: the writer dismissed it)."""
        self.recorder.record(types.WINDOW_SHOW_MESSAGE_REQUEST, types.ShowMessageRequestParams(
            type=kind, message=message, actions=[types.MessageActionItem(title=c) for c in choices]))
        return self.choice

    async def configuration(self, section: str) -> Any:
        return [self.settings]

    async def register_capability(self, registration: types.Registration) -> None:
        self.recorder.record(types.CLIENT_REGISTER_CAPABILITY, types.RegistrationParams([registration]))

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> types.ApplyWorkspaceEditResult:
        self.recorder.record(types.WORKSPACE_APPLY_EDIT, types.ApplyWorkspaceEditParams(edit=edit, label=label))
        return types.ApplyWorkspaceEditResult(applied=True)

    def refresh_diagnostics(self) -> None:
        self.recorder.record(types.WORKSPACE_DIAGNOSTIC_REFRESH, None)

    async def refresh_code_lenses(self) -> None:
        self.recorder.record(types.WORKSPACE_CODE_LENS_REFRESH, None)

    async def refresh_inlay_hints(self) -> None:
        self.recorder.record(types.WORKSPACE_INLAY_HINT_REFRESH, None)

    async def create_progress(self, token: str) -> None:
        return None

    def progress(self, token: str, value: Any) -> None:
        self.recorder.record(types.PROGRESS, types.ProgressParams(token=token, value=value))

    def unstructure(self, value: Any) -> Any:
        return self._converter.unstructure(value)


@dataclass
class InProcess:
    """A session in this process, its recorder, and editor-like document operations."""

    session: Session
    recorder: Recorder
    root: Path

    def uri(self, rel: str) -> str:
        return (self.root / rel).as_uri()

    def open(self, rel: str, text: str, version: int = 1) -> str:
        """Open ``rel`` (relative to the root) with ``text``, as an editor does; returns its URI."""
        uri = self.uri(rel)
        item = types.TextDocumentItem(uri=uri, language_id="json" if rel.endswith(".json") else "markdown",
                                      version=version, text=text)
        assert self.session.documents is not None
        self.session.documents.put_text_document(item)
        diagnostics.did_open(self.session, types.DidOpenTextDocumentParams(text_document=item))
        return uri

    def change(self, uri: str, version: int, text: str) -> None:
        """Replace the whole text of an open document (a new ``version``)."""
        params = types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)])
        assert self.session.documents is not None
        for change in params.content_changes:
            self.session.documents.update_text_document(params.text_document, change)
        diagnostics.did_change(self.session, params)

    def save(self, uri: str) -> None:
        diagnostics.did_save(self.session, types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))

    def close(self, uri: str) -> None:
        assert self.session.documents is not None
        self.session.documents.remove_text_document(uri)
        diagnostics.did_close(self.session, types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))

    async def indexed(self) -> None:
        """Wait until the first index exists and no scan is running or pending."""
        await self.session.ready.wait()
        await workspace.wait_reindexed(self.session)


@contextlib.asynccontextmanager
async def in_process(root: Path, profile: str = "visual-studio-code", *, settings: dict[str, Any] | None = None,
                     initialization_options: Any = None) -> AsyncIterator[InProcess]:
    """A session on the workspace folder ``root`` under ``profile``, indexed; shut down after."""
    recorder = Recorder()
    session = Session(RecordingPort(recorder, settings))
    caps = capabilities(profile)
    documents = GroundingWorkspace(root.as_uri(), types.TextDocumentSyncKind.Incremental,
                                   [types.WorkspaceFolder(uri=root.as_uri(), name=root.name)], negotiate(caps))
    session.attach(types.InitializeParams(capabilities=caps, root_uri=root.as_uri(),
                                          initialization_options=initialization_options), documents)
    here = InProcess(session, recorder, root)
    try:
        await workspace.initialized(session, types.InitializedParams())
        await here.indexed()
        yield here
    finally:
        await workspace.shutdown(session, None)
        session.tasks.cancel_all()
