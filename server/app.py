"""Build the Grounding language server: the ONE place LSP handlers are registered (SPEC §10).

Shape (esbonio-style): :func:`build_server` makes a fresh :class:`GroundingServer` (no module
level instance, so tests can build several in one process), registers the lifecycle and
text-sync handlers below, then calls ``register(server, state)`` of every module named in
:data:`FEATURE_MODULES`. A feature module that fails to import or register is logged and
skipped; the others keep working.

Adding a feature (``server/features/hover.py``)::

    def register(server: GroundingServer, state: ServerState) -> None:
        @server.feature(types.TEXT_DOCUMENT_HOVER)
        def hover(ls: GroundingServer, params: types.HoverParams) -> types.Hover | None:
            doc = ls.workspace.get_text_document(params.text_document.uri)
            line, col = ls.position_codec.core_position(params.position, doc.text_lines)
            ...

and add ``"server.features.hover"`` to :data:`FEATURE_MODULES`. pygls accepts one handler
per LSP method, so features never register ``textDocument/did*``, ``initialized`` or
``shutdown`` themselves: they subscribe with :meth:`ServerState.on_document`,
:meth:`ServerState.on_initialized` and :meth:`ServerState.on_shutdown`, and the handlers
here fan out to them.

Position encoding: pygls 2.1.1 picks the client's first offered encoding inside its
``initialize`` handler and builds its own ``Workspace`` there, with no hook for either.
:class:`GroundingProtocol` overrides that one handler to negotiate with
:func:`server.positions.negotiate` and build a :class:`server.documents.GroundingWorkspace`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import from_fs_path

from server.documents import DocumentSnapshot, GroundingDocument, GroundingWorkspace
from server.positions import PositionCodec, negotiate

__all__ = [
    "DOCUMENT_TEXT",
    "FEATURE_MODULES",
    "DocumentEvent",
    "GroundingProtocol",
    "GroundingServer",
    "ServerState",
    "build_server",
    "serve_stdio",
]

logger = logging.getLogger(__name__)

SERVER_NAME = "grounding"

FEATURE_MODULES: tuple[str, ...] = (
    # Each module has ``register(server: GroundingServer, state: ServerState) -> None``.
    # Keep this order stable: it is the order listeners run in.
    "server.features.evidence",
    "server.features.diagnostics",
    "server.features.actions",
    "server.features.completion",
    "server.features.commands",
    "server.features.status",
    "server.features.navigation",
    "server.features.memory",
)
"""Dotted names of the feature modules :func:`build_server` registers, in order."""

DOCUMENT_TEXT = "grounding/documentText"
"""Custom request ``{uri}`` -> ``{uri, version, text}`` (or null when the document is not
open): the server's current text of an open document. Used by the e2e tests to check that
incremental sync kept the server's text equal to the editor's."""


# --------------------------------------------------------------------------- state

DocumentEventKind = Literal["open", "change", "save", "close"]


@dataclass(frozen=True, slots=True)
class DocumentEvent:
    """One text-sync event, delivered to listeners after the server's text was updated.

    ``snapshot`` is the document after the event; None on ``close`` (the document is gone).
    """

    kind: DocumentEventKind
    uri: str
    snapshot: DocumentSnapshot | None


DocumentListener = Callable[["GroundingServer", DocumentEvent], Awaitable[None] | None]
LifecycleListener = Callable[["GroundingServer"], Awaitable[None] | None]


class ServerState:
    """Mutable per-server state, owned by the event loop (one per :class:`GroundingServer`).

    Features keep their own state as attributes they add here (e.g. ``state.index``) or in
    closures made in ``register``; background work gets a :class:`DocumentSnapshot`, never
    a live document, and checks :meth:`is_current` before publishing.
    """

    def __init__(self, server: GroundingServer) -> None:
        self.server = server
        self.shutdown_requested = False
        self.initialization_options: Any = None
        from server.engine import Engine

        self.engine = Engine(server)
        """The Grounding engine: workspace, index state and draft reports (server/engine.py)."""
        self.features: list[str] = []
        """Dotted names of the feature modules that registered successfully."""
        self._document_listeners: list[DocumentListener] = []
        self._initialized_listeners: list[LifecycleListener] = []
        self._shutdown_listeners: list[LifecycleListener] = []
        self._tasks: set[asyncio.Task[None]] = set()  # strong refs to running listener tasks

    # -- documents -------------------------------------------------------------------

    @property
    def codec(self) -> PositionCodec:
        """The negotiated codec (valid after ``initialize``)."""
        return self.server.position_codec

    def document(self, uri: str) -> GroundingDocument | None:
        """The open document for ``uri``, or None when the client has not opened it."""
        return self.server.workspace.open_document(uri)

    def snapshot(self, uri: str) -> DocumentSnapshot | None:
        """A frozen view of the open document ``uri`` (None if it is not open)."""
        document = self.document(uri)
        return document.snapshot() if document is not None else None

    def is_current(self, snapshot: DocumentSnapshot) -> bool:
        """True while ``snapshot`` still is the open document's version and text."""
        document = self.document(snapshot.uri)
        return (
            document is not None
            and document.version == snapshot.version
            and document.source == snapshot.text
        )

    # -- subscriptions ---------------------------------------------------------------

    def on_document(self, listener: DocumentListener) -> DocumentListener:
        """Call ``listener(server, event)`` after every open/change/save/close (decorator).

        The event's snapshot is taken when the notification is handled; listeners then run
        in a task, in subscription order; an exception in one is logged and the next still
        runs. A listener may be ``async``; heavy work belongs in ``asyncio.to_thread`` on the
        snapshot, and results are published only if :meth:`is_current` still holds.
        """
        self._document_listeners.append(listener)
        return listener

    def on_initialized(self, listener: LifecycleListener) -> LifecycleListener:
        """Call ``listener(server)`` once the client sent ``initialized`` (decorator)."""
        self._initialized_listeners.append(listener)
        return listener

    def on_shutdown(self, listener: LifecycleListener) -> LifecycleListener:
        """Call ``listener(server)`` on the ``shutdown`` request (decorator)."""
        self._shutdown_listeners.append(listener)
        return listener

    def _dispatch_document(self, kind: DocumentEventKind, uri: str) -> None:
        """Snapshot ``uri`` now and run the document listeners in a background task."""
        if not self._document_listeners:
            return
        snapshot = self.snapshot(uri) if kind != "close" else None
        if snapshot is None and kind != "close":
            return
        event = DocumentEvent(kind=kind, uri=uri, snapshot=snapshot)
        task = asyncio.get_running_loop().create_task(self._emit_document(event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _emit_document(self, event: DocumentEvent) -> None:
        for listener in tuple(self._document_listeners):
            await _call_guarded(listener, self.server, event)

    async def _emit_lifecycle(self, listeners: list[LifecycleListener]) -> None:
        for listener in tuple(listeners):
            await _call_guarded(listener, self.server)


async def _call_guarded(listener: Callable[..., Any], *args: Any) -> None:
    """Run one listener; log (never raise) its failure so the other features keep working."""
    try:
        result = listener(*args)
        if inspect.isawaitable(result):
            await result
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("listener %r failed", getattr(listener, "__qualname__", listener))


# ------------------------------------------------------------------------ protocol


class GroundingProtocol(LanguageServerProtocol):
    """pygls's protocol with our ``initialize``: SPEC §10 encoding and our document model."""

    _server: GroundingServer

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        """Negotiate the position encoding, build the workspace, then the capabilities.

        Mirrors pygls 2.1.1's ``LanguageServerProtocol.lsp_initialize`` except for
        :func:`negotiate` (pygls takes the client's first offer, even ``utf-16`` ahead of
        ``utf-8``) and :class:`GroundingWorkspace` (pygls hard-codes its ``Workspace``).
        """
        self._server.process_id = params.process_id
        self._server.state.initialization_options = params.initialization_options
        sync_kind = self._server._text_document_sync_kind
        self.client_capabilities = params.capabilities
        encoding = negotiate(params.capabilities)

        root_uri = params.root_uri
        if root_uri is None and params.root_path is not None:
            root_uri = from_fs_path(params.root_path)
        self._workspace = GroundingWorkspace(
            root_uri, sync_kind, params.workspace_folders or [], encoding
        )
        logger.info("initialize: position encoding %s", encoding.value)

        if (user_handler := self.fm.features.get(types.INITIALIZE)) is not None:
            yield user_handler, (params,), None

        self.server_capabilities = ServerCapabilitiesBuilder(
            self.client_capabilities,
            set({**self.fm.features, **self.fm.builtin_features}.keys()),
            self.fm.feature_options,
            list(self.fm.commands.keys()),
            sync_kind,
            self._server._notebook_document_sync,
            encoding,
        ).build()  # type: ignore[no-untyped-call]  # pygls leaves build() unannotated
        return types.InitializeResult(
            capabilities=self.server_capabilities, server_info=self.server_info
        )


# -------------------------------------------------------------------------- server


class GroundingServer(LanguageServer):
    """The pygls server plus Grounding's :class:`ServerState` and negotiated codec."""

    protocol: GroundingProtocol

    def __init__(self, name: str = SERVER_NAME, version: str | None = None) -> None:
        super().__init__(
            name,
            version or _package_version(),
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=GroundingProtocol,
        )
        self.state = ServerState(self)

    @property
    def workspace(self) -> GroundingWorkspace:
        """The workspace built at ``initialize`` (raises ``RuntimeError`` before it)."""
        workspace = self.protocol.workspace
        assert isinstance(workspace, GroundingWorkspace)  # built by GroundingProtocol
        return workspace

    @property
    def position_codec(self) -> PositionCodec:
        """The codec for the negotiated encoding (valid after ``initialize``)."""
        return self.workspace.position_codec

    @property
    def position_encoding(self) -> types.PositionEncodingKind:
        """The negotiated encoding: ``utf-16``, ``utf-8`` or ``utf-32``."""
        return self.position_codec.encoding


def _package_version() -> str:
    try:
        return metadata.version("grounding")
    except metadata.PackageNotFoundError:
        return "0+unknown"


# -------------------------------------------------------------------- registration


def _register_core_handlers(server: GroundingServer, state: ServerState) -> None:
    """Lifecycle, text sync and ``grounding/documentText``: the handlers every session has."""

    @server.feature(types.INITIALIZED)
    async def initialized(ls: GroundingServer, params: types.InitializedParams) -> None:
        await state._emit_lifecycle(state._initialized_listeners)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: GroundingServer, params: None) -> None:
        state.shutdown_requested = True
        await state._emit_lifecycle(state._shutdown_listeners)

    # pygls's builtin handlers apply the text change first, then call these synchronously;
    # the snapshot is taken right here, so it is exactly the version this event produced
    # (a listener task may start after a later change was already applied).
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GroundingServer, params: types.DidOpenTextDocumentParams) -> None:
        state._dispatch_document("open", params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GroundingServer, params: types.DidChangeTextDocumentParams) -> None:
        state._dispatch_document("change", params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GroundingServer, params: types.DidSaveTextDocumentParams) -> None:
        state._dispatch_document("save", params.text_document.uri)

    # pygls removes the document before this runs, so a close event has no snapshot.
    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GroundingServer, params: types.DidCloseTextDocumentParams) -> None:
        state._dispatch_document("close", params.text_document.uri)

    @server.feature(DOCUMENT_TEXT)
    def document_text(ls: GroundingServer, params: Any) -> dict[str, Any] | None:
        uri = params["uri"] if isinstance(params, dict) else params.uri
        snapshot = state.snapshot(uri)
        if snapshot is None:
            return None
        return {"uri": snapshot.uri, "version": snapshot.version, "text": snapshot.text}


def _register_features(
    server: GroundingServer, state: ServerState, modules: Sequence[str]
) -> list[str]:
    """Import each feature module and call its ``register``; return the ones that worked."""
    registered = []
    for name in modules:
        try:
            module = importlib.import_module(name)
            module.register(server, state)
        except Exception:
            logger.exception("feature %s failed to register; continuing without it", name)
            continue
        registered.append(name)
    return registered


def build_server(features: Sequence[str] | None = None) -> GroundingServer:
    """Build a new, unstarted Grounding language server.

    ``features`` are dotted module names to register (default :data:`FEATURE_MODULES`);
    each module's ``register(server, state)`` is called once, in order. Every call returns
    an independent server with its own :class:`ServerState`. Raises nothing for a broken
    feature module (it is logged and skipped).
    """
    server = GroundingServer()
    _register_core_handlers(server, server.state)
    server.state.features = _register_features(
        server, server.state, FEATURE_MODULES if features is None else features
    )
    return server


def serve_stdio() -> int:
    """Run a server on stdin/stdout until ``exit``; the CLI's ``grounding lsp``.

    Returns the LSP exit code: 0 if ``shutdown`` came before ``exit``, else 1.
    """
    server = build_server()
    server.start_io()
    return 0 if server.state.shutdown_requested else 1
