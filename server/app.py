"""Build the Grounding language server: the ONE place LSP handlers are registered (SPEC §10).

:func:`build_server` makes a fresh :class:`GroundingServer` (no module-level instance, so
tests can build several in one process) and registers every handler in
:func:`_register`. Each handler is one line: it forwards to a plain function of
``server/features/*.py`` — ``fn(session, params)`` — through the session's error guard
(:meth:`server.session.Session.guard`), which logs a failing feature and answers null so the
others keep working. The feature functions hold no state of their own: everything lives in
the :class:`~server.session.Session` (``server/session.py``; docs/architecture.md tells
what runs where). Tests call the feature functions in-process with a session of their own.

Adding a feature: write ``async def hover(session, params)`` in a feature module, and one
``@server.feature(...)`` line below that forwards to it.

Position encoding: pygls 2.1.1 picks the client's first offered encoding inside its
``initialize`` handler and builds its own ``Workspace`` there, with no hook for either.
:class:`GroundingProtocol` overrides that one handler to negotiate with
:func:`server.positions.negotiate` and build a :class:`server.documents.GroundingWorkspace`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import json
import logging
import os
import stat
import sys
import threading
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, BinaryIO

import attrs
from cattrs import transform_error
from lsprotocol import types
from pygls import IS_WASM
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import from_fs_path

from server import heap
from server.convert import PAUSE_EVERY
from server.documents import GroundingWorkspace
from server.features import (
    actions,
    commands,
    completion,
    diagnostics,
    hints,
    memory,
    navigation,
    rename,
    status,
    symbols,
    workspace,
)
from server.features import references as reference_lenses
from server.positions import PositionCodec, negotiate
from server.protocol import DOCUMENT_TEXT, VERSION_TEXT
from server.session import SWITCH_INTERVAL_SECONDS, Session

__all__ = ["GroundingProtocol", "GroundingServer", "PyglsClient", "QueuedWriter", "build_server", "serve_stdio"]

logger = logging.getLogger(__name__)

SERVER_NAME = "grounding"


# ------------------------------------------------------------------------ protocol


class GroundingProtocol(LanguageServerProtocol):
    """pygls's protocol with our ``initialize``, an answer for every request, and a writer
    that never blocks the event loop.

    ``initialize``: SPEC §10 encoding and our document model. Every request is answered,
    also the ones pygls 2.1.1 drops (:meth:`structure_message`, :meth:`handle_message`).
    Messages go out through a :class:`QueuedWriter` (:meth:`set_writer`).
    """

    _server: GroundingServer
    _shutdown_id: int | str | None = None
    """The id of the ``shutdown`` request being served, until its response is sent."""
    deferred_exit: asyncio.Future[None] | None = None
    """An ``exit`` that arrived before the ``shutdown`` response went out (both in one write:
    the event loop reads them in the same turn), run once it has (:meth:`_exit_after_shutdown`)."""

    def _send_response(self, msg_id: Any, result: Any | None = None,
                       error: types.ResponseError | None = None) -> None:
        super()._send_response(msg_id, result, error)
        if self._shutdown_id is not None and msg_id == self._shutdown_id:
            self._shutdown_id = None
            self._shutdown_sent.set()

    async def _exit_after_shutdown(self, message: Any) -> None:
        await self._shutdown_sent.wait()
        # a plain callback, not this task: pygls's exit raises SystemExit, which then leaves
        # the loop as it does for an exit read in turn (a task would log it as unretrieved)
        asyncio.get_running_loop().call_soon(LanguageServerProtocol.handle_message, self, message)

    def set_writer(self, writer: Any, include_headers: bool = True) -> None:
        """Send through a :class:`QueuedWriter` around pygls's blocking stdout writer."""
        if not inspect.iscoroutinefunction(getattr(writer, "write", None)) and not isinstance(writer, QueuedWriter):
            session = getattr(self._server, "session", None)
            writer = QueuedWriter(writer, session.foreground.pause_output if session is not None else None)
        super().set_writer(writer, include_headers)

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
        sync_kind = self._server._text_document_sync_kind
        self.client_capabilities = params.capabilities
        encoding = negotiate(params.capabilities)

        root_uri = params.root_uri
        if root_uri is None and params.root_path is not None:
            root_uri = from_fs_path(params.root_path)
        self._workspace = GroundingWorkspace(
            root_uri, sync_kind, params.workspace_folders or [], encoding
        )
        self._server.session.attach(params, self._workspace)
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

    # -- requests pygls 2.1.1 would leave unanswered (issue 13 item 15) ----------------

    def structure_message(self, data: dict[str, Any]) -> Any:
        """The deserialiser of pygls, except that a *request* whose params do not deserialise
        (a negative or 2**31 position, ``{}`` for a hover) becomes a
        :class:`_UnreadableRequest`, answered ``InvalidParams`` by :meth:`handle_message`.

        pygls raises from inside ``json.loads``'s object hook, so its reader loop logs the
        error and the client waits for an answer forever. Notifications still raise (they get
        no answer; the reader logs them).
        """
        try:
            return super().structure_message(data)
        except (JsonRpcInvalidParams, JsonRpcInternalError) as exc:
            if "id" in data and "method" in data and isinstance(data["id"], (int, str)):
                return _UnreadableRequest(data["id"], str(data["method"]), _reason(exc.__cause__ or exc))
            raise

    def handle_message(self, message: Any) -> None:
        """Answer every request (LSP 3.17 "shutdown"; JSON-RPC 2.0 "InvalidParams").

        - a request after ``shutdown``: error ``InvalidRequest`` (-32600); pygls drops it;
        - a request whose params did not deserialise: error ``InvalidParams`` (-32602).
        Everything else goes to pygls unchanged.
        """
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None)
        if self._shutdown and method not in (None, types.EXIT) and isinstance(msg_id, (int, str)):
            self._send_response(msg_id, error=types.ResponseError(
                code=types.ErrorCodes.InvalidRequest,
                message=f"{method}: the server is shutting down; no request is served after"
                " 'shutdown' (send 'exit')"))
            return
        if method == types.SHUTDOWN and isinstance(msg_id, (int, str)) and not self._shutdown:
            self._shutdown_id = msg_id
            self._shutdown_sent = asyncio.Event()
        elif method == types.EXIT and self._shutdown_id is not None:
            # LSP: the client sends exit after the shutdown response; one that did not wait
            # (both in one write) still gets the response and exit code 0, as it did when
            # pygls's reader thread gave the shutdown handler time to finish.
            self.deferred_exit = asyncio.ensure_future(self._exit_after_shutdown(message))
            return
        if isinstance(message, _UnreadableRequest):
            logger.warning("request %r %s: params do not deserialise: %s", message.id,
                           message.method, message.reason)
            self._send_response(message.id, error=types.ResponseError(
                code=types.ErrorCodes.InvalidParams,
                message=f"{message.method}: invalid params ({message.reason})"))
            return
        super().handle_message(message)


@dataclass(frozen=True, slots=True)
class _UnreadableRequest:
    """A request whose params did not deserialise (see :meth:`GroundingProtocol.structure_message`)."""

    id: int | str
    method: str
    reason: str
    jsonrpc: str = "2.0"


def _reason(error: BaseException) -> str:
    """What cattrs found wrong, e.g. ``expected int @ $.params.position.line`` (one line)."""
    if isinstance(error, BaseExceptionGroup):
        details = transform_error(error, path="$")
        if details:
            return "; ".join(details[:3])[:300]
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


class QueuedWriter:
    """Writes messages to the client from one daemon thread, in two lanes.

    pygls writes each message to stdout on the event loop, and a write blocks until the
    client has read it: an editor busy parsing a large publication would stall every request
    behind it. Here the loop only enqueues the bytes.

    - :meth:`write` (every pygls message: responses, draft diagnostics, notifications) is the
      *urgent* lane, written in order;
    - :meth:`write_bulk` (evidence files' diagnostics, ``server/features/evidence.py``) is the
      *bulk* lane, written in order, only while the urgent lane is empty and ``gate`` lets it
      (``Session.foreground.pause_output``: not while a draft check is expected, running or
      being published; bounded, so it never starves). On Debian's copyright files the first
      evidence refresh sends 60 MB (single publications up to 1.6 MB), and a keystroke's
      publication queued behind 1-5 MB of them waited 0.3-1.2 s for the client to read them
      (BENCHMARKS.md, "Debian typing").

    Reordering between the lanes is safe: a URI's publications all go through one lane
    (evidence files: bulk; drafts: urgent), and LSP does not order notifications of different
    documents or responses against notifications. ``close`` flushes what is queued (urgent
    first: the ``shutdown`` reply before ``exit``) for up to 5 s, then closes the stream. A
    broken pipe ends the writing (the client is gone).
    """

    def __init__(self, inner: Any, gate: Callable[[int], object] | None = None) -> None:
        self._inner = inner
        self.gate = gate
        """Called with the message's size (blocking, in the writer thread) before each bulk
        message; None: no wait."""
        self._cond = threading.Condition()
        self._urgent: deque[bytes] = deque()
        self._bulk: deque[bytes] = deque()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="grounding-stdout", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        with self._cond:
            self._urgent.append(data)
            self._cond.notify()

    def write_bulk(self, data: bytes) -> None:
        """Queue one background message (see the class docstring)."""
        with self._cond:
            self._bulk.append(data)
            self._cond.notify()

    @property
    def bulk_pending(self) -> int:
        """Bulk messages queued and not written yet."""
        with self._cond:
            return len(self._bulk)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self._inner.close()

    def _next(self) -> bytes | None:
        """The next message to write (urgent first; bulk once the gate lets it), or None when
        closing with nothing left.
        """
        gated = False
        while True:
            with self._cond:
                while not self._urgent and not self._bulk and not self._closing:
                    self._cond.wait()
                if self._urgent:
                    return self._urgent.popleft()
                if not self._bulk:
                    return None  # closing, everything written
                if gated or self._closing or self.gate is None:
                    return self._bulk.popleft()
                size = len(self._bulk[0])
            self.gate(size)  # outside the lock: urgent messages queue meanwhile and go first
            gated = True

    def _run(self) -> None:
        while (data := self._next()) is not None:
            try:
                self._inner.write(data)
            except (BrokenPipeError, OSError, ValueError):
                logger.error("Connection to the client is lost; dropping what is left to send.")
                return


# -------------------------------------------------------------------------- server


class GroundingServer(LanguageServer):
    """The pygls server plus Grounding's :class:`~server.session.Session`."""

    protocol: GroundingProtocol

    def __init__(self, name: str = SERVER_NAME, version: str | None = None) -> None:
        super().__init__(
            name,
            version or _package_version(),
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=GroundingProtocol,
        )
        self.session = Session(PyglsClient(self))

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve until ``exit`` or the end of input, as pygls's ``start_io`` does, reading the input
        through :class:`PipeReader` when it is a pipe or a socket (every editor's stdio), else
        through pygls's own ``StdinAsyncReader``. pygls's message loop (``run_async``), its
        framing and its JSON-RPC handling are used unchanged; only the reader differs.
        """
        if IS_WASM:
            super().start_io(stdin, stdout)
            return
        self._stop_event = threading.Event()
        self._stdout = stdout or sys.stdout.buffer
        self.protocol.set_writer(StdoutWriter(self._stdout))
        try:
            asyncio.run(self._serve_io(stdin or sys.stdin.buffer))
        except BrokenPipeError:
            logger.error("Connection to the client is lost! Shutting down the server.")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()  # type: ignore[no-untyped-call]  # (pygls has no annotation)

    async def _serve_io(self, stdin: BinaryIO) -> None:
        assert self._stop_event is not None
        reader = await PipeReader.open(stdin, written=(self._stdout, sys.stderr))
        try:
            await run_async(stop_event=self._stop_event,
                            reader=reader or StdinAsyncReader(stdin, self.thread_pool),
                            protocol=self.protocol, logger=logger, error_handler=self.report_server_error)
            if self.protocol.deferred_exit is not None:  # the end of input right after exit
                await asyncio.wait_for(asyncio.shield(self.protocol.deferred_exit), 10.0)
        finally:
            if reader is not None:
                reader.close()

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


class PipeReader:
    """pygls's ``AsyncReader`` (``readline``, ``readexactly``) over an asyncio
    ``StreamReader`` connected to the input pipe (``loop.connect_read_pipe``): the event loop
    reads the pipe when the selector says it is readable, and a message's header lines and
    body are then served from that one buffer in the same turn of the loop.

    Why: pygls's ``StdinAsyncReader`` runs every ``readline`` and the body's ``read`` in an
    executor thread, three thread -> loop hops per message, and each hop waits for the GIL
    behind whatever reader thread is computing (on Debian's bench, didChange send -> loop
    median 11.5 ms, p90 27 ms while the first evidence refresh ran). Only pipes and sockets can
    be watched by the selector: :meth:`open` returns None for anything else (a regular file,
    a terminal), and the server keeps pygls's reader for it.

    A header line longer than :data:`HEADER_LINE_LIMIT` bytes is dropped (read up to its end
    and answered as an empty, non-matching header, which pygls's loop ignores); at the end of
    input ``readline`` answers ``b""`` and ``readexactly`` what arrived (pygls's loop stops).
    """

    HEADER_LINE_LIMIT = 1 << 16

    def __init__(self, stream: asyncio.StreamReader, transport: asyncio.ReadTransport, fd: int) -> None:
        self._stream = stream
        self._transport = transport
        self._fd = fd

    @classmethod
    async def open(cls, stdin: BinaryIO, written: Sequence[Any] = ()) -> PipeReader | None:
        """A reader over ``stdin`` if it is a pipe or a socket, else None (never raises).

        ``written``: the streams the server writes (stdout, stderr). The transport makes the
        descriptor non-blocking, a flag of the open file, so when one of them is the same
        socket as ``stdin`` (one socket as the process's stdio, as inetd or ``socat`` start a
        server) its writes would fail with ``BlockingIOError`` and lose bytes: then None.
        """
        try:
            fd = stdin.fileno()
            info = os.fstat(fd)
        except (OSError, ValueError, io.UnsupportedOperation):
            return None
        mode = info.st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return None
        for stream in written:
            try:
                other = os.fstat(stream if isinstance(stream, int) else stream.fileno())
            except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
                continue
            if (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino):
                return None
        loop = asyncio.get_running_loop()
        stream = asyncio.StreamReader(limit=cls.HEADER_LINE_LIMIT, loop=loop)
        pipe = os.fdopen(os.dup(fd), "rb", buffering=0)  # the transport closes its own copy at the end
        try:
            transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream, loop=loop), pipe)
        except (OSError, ValueError, NotImplementedError):  # (e.g. an event loop without pipe support)
            pipe.close()
            return None
        return cls(stream, transport, fd)

    async def readline(self) -> bytes:
        """One header line with its ``\r\n``; ``b""`` at the end of input."""
        try:
            return await self._stream.readline()
        except ValueError:  # longer than the limit: StreamReader dropped what it had read
            logger.warning("dropped a header line longer than %d bytes", self.HEADER_LINE_LIMIT)
            return b"X-Dropped: \r\n"

    async def readexactly(self, n: int) -> bytes:
        """The ``n`` bytes of a body; fewer (what arrived) at the end of input."""
        try:
            return await self._stream.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial

    def close(self) -> None:
        """Close the transport and give the descriptor back its blocking mode (it is the
        process's stdin, shared with whoever started it).
        """
        with contextlib.suppress(OSError):
            os.set_blocking(self._fd, True)
        self._transport.close()

RELATED_JSON_HELD = 2_000
"""Serialised ``relatedInformation`` lists :class:`PyglsClient` keeps (then it starts over)."""


class PyglsClient:
    """The session's :class:`~server.session.Client` port over pygls (the real editor)."""

    def __init__(self, server: GroundingServer) -> None:
        self.server = server
        self._related_json: dict[int, tuple[Sequence[types.DiagnosticRelatedInformation], str]] = {}
        """``relatedInformation`` lists serialised before, by the identity of the list (held
        with it, so the identity is not reused): a draft's conflict findings carry the same
        lists on every keystroke (``server.convert.lsp_diagnostics``' ``related_lists``); on
        Debian's copyright files 8,400 related locations per publication, 6.9 MB of JSON."""

    def publish_diagnostics(self, uri: str, version: int | None, diagnostics: Sequence[types.Diagnostic]) -> None:
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=list(diagnostics)))

    def prepare_diagnostics(self, uri: str, version: int | None, diagnostics: Sequence[types.Diagnostic],
                            pause: Callable[[], object] | None = None) -> bytes:
        """The framed JSON-RPC message, serialised as pygls's ``_send_data`` does (lsprotocol's
        converter; ASCII JSON, so ``Content-Length`` counts characters = bytes); safe in a
        worker thread. A ``relatedInformation`` list serialised before (the same list object)
        is reused as JSON text. ``pause`` (a background caller's yield point) is called every
        ``server.convert.PAUSE_EVERY`` diagnostics.
        """
        protocol = self.server.protocol
        converter = protocol._converter
        parts = []
        for at, diagnostic in enumerate(diagnostics):
            if pause is not None and at and at % PAUSE_EVERY == 0:
                pause()
            related = diagnostic.related_information
            if not related:
                parts.append(json.dumps(converter.unstructure(diagnostic)))
                continue
            held = self._related_json.get(id(related))
            if held is None or held[0] is not related:
                if len(self._related_json) >= RELATED_JSON_HELD:
                    self._related_json.clear()
                held = self._related_json[id(related)] = (related, json.dumps(converter.unstructure(related)))
            head = json.dumps(converter.unstructure(attrs.evolve(diagnostic, related_information=None)))
            parts.append(f'{head[:-1]}, "relatedInformation": {held[1]}}}')
        params: dict[str, Any] = {"uri": uri}
        if version is not None:
            params["version"] = version
        envelope = json.dumps({"method": types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, "jsonrpc": "2.0",
                               "params": params})
        body = f'{envelope[:-2]}, "diagnostics": [{", ".join(parts)}]}}}}'
        header = (f"Content-Length: {len(body)}\r\n"
                  f"Content-Type: {protocol.CONTENT_TYPE}; charset={protocol.CHARSET}\r\n\r\n")
        return (header + body).encode(protocol.CHARSET)

    def send_prepared(self, prepared: bytes, bulk: bool = False) -> None:
        writer = self.server.protocol.writer
        if writer is None:
            logger.error("Unable to send data, no available transport!")
            return
        if bulk and isinstance(writer, QueuedWriter):
            writer.write_bulk(prepared)
            return
        result = writer.write(prepared)
        if inspect.isawaitable(result):
            asyncio.ensure_future(result)

    def notify(self, method: str, params: Any) -> None:
        self.server.protocol.notify(method, params)

    def show_message(self, kind: types.MessageType, message: str) -> None:
        self.server.window_show_message(types.ShowMessageParams(kind, message))

    def log_message(self, kind: types.MessageType, message: str) -> None:
        self.server.window_log_message(types.LogMessageParams(kind, message))

    async def show_message_request(self, kind: types.MessageType, message: str,
                                   choices: Sequence[str]) -> str | None:
        try:
            answer = await self.server.window_show_message_request_async(types.ShowMessageRequestParams(
                type=kind, message=message, actions=[types.MessageActionItem(title=c) for c in choices]))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a client that cannot ask: the caller treats it as "no"
            logger.info("window/showMessageRequest failed: %s", exc)
            return None
        return answer.title if answer is not None else None

    async def configuration(self, section: str) -> Any:
        return await self.server.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=section)]))

    async def register_capability(self, registration: types.Registration) -> None:
        await self.server.client_register_capability_async(types.RegistrationParams(registrations=[registration]))

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> types.ApplyWorkspaceEditResult:
        return await self.server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))

    def refresh_diagnostics(self) -> None:
        try:
            self.server.workspace_diagnostic_refresh(None)
        except Exception:
            logger.info("workspace/diagnostic/refresh failed")

    async def refresh_code_lenses(self) -> None:
        await self.server.workspace_code_lens_refresh_async(None)

    async def refresh_inlay_hints(self) -> None:
        await self.server.workspace_inlay_hint_refresh_async(None)

    async def create_progress(self, token: str) -> None:
        await self.server.work_done_progress.create_async(token)

    def progress(self, token: str, value: Any) -> None:
        progress = self.server.work_done_progress
        if isinstance(value, types.WorkDoneProgressBegin):
            progress.begin(token, value)
        elif isinstance(value, types.WorkDoneProgressReport):
            progress.report(token, value)
        else:
            progress.end(token, value)

    def unstructure(self, value: Any) -> Any:
        return self.server.protocol._converter.unstructure(value)


def _package_version() -> str:
    try:
        return metadata.version("grounding")
    except metadata.PackageNotFoundError:
        return "0+unknown"


# -------------------------------------------------------------------- registration


def _register(server: GroundingServer) -> None:  # noqa: C901  (one line per handler, by design)
    """Every handler of the server, each a one-line forward through the session's guard."""

    # lifecycle and workspace
    @server.feature(types.INITIALIZED)
    async def initialized(ls: GroundingServer, params: types.InitializedParams) -> None:
        await ls.session.guard("initialized", workspace.initialized, params)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: GroundingServer, params: None) -> None:
        await ls.session.guard("shutdown", workspace.shutdown, params)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration(ls: GroundingServer, params: types.DidChangeConfigurationParams) -> None:
        await ls.session.guard("didChangeConfiguration", workspace.configuration_changed, params)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls: GroundingServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.session.guard_sync("didChangeWatchedFiles", workspace.watched_files, params)

    # text sync: pygls has applied the change when these run; they only schedule checks
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GroundingServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.session.guard_sync("didOpen", diagnostics.did_open, params)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GroundingServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.session.guard_sync("didChange", diagnostics.did_change, params)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GroundingServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.session.guard_sync("didSave", diagnostics.did_save, params)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GroundingServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.session.guard_sync("didClose", diagnostics.did_close, params)

    @server.feature(DOCUMENT_TEXT)
    def document_text(ls: GroundingServer, params: Any) -> dict[str, Any] | None:
        return ls.session.guard_sync(DOCUMENT_TEXT, diagnostics.document_text, params)

    # diagnostics and status
    @server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, diagnostics.DIAGNOSTIC_OPTIONS)
    async def pull(ls: GroundingServer, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
        return await ls.session.guard("diagnostic", diagnostics.pull, params, foreground=True) or _EMPTY_REPORT

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, status.CODE_LENS_OPTIONS)
    async def code_lens(ls: GroundingServer, params: types.CodeLensParams) -> list[types.CodeLens] | None:
        return await ls.session.guard("codeLens", status.code_lens, params, foreground=True)

    # navigation
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: GroundingServer, params: types.HoverParams) -> types.Hover | None:
        return await ls.session.guard("hover", navigation.hover, params, foreground=True)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    async def definition(ls: GroundingServer, params: types.DefinitionParams) -> list[types.Location] | None:
        return await ls.session.guard("definition", navigation.definition, params, foreground=True)

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    async def references(ls: GroundingServer, params: types.ReferenceParams) -> list[types.Location] | None:
        return await ls.session.guard("references", navigation.references, params, foreground=True)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbol(ls: GroundingServer, params: types.DocumentSymbolParams) -> Any:
        return await ls.session.guard("documentSymbol", symbols.document_symbol, params, foreground=True)

    @server.feature(types.WORKSPACE_SYMBOL)
    async def workspace_symbol(ls: GroundingServer, params: types.WorkspaceSymbolParams) -> Any:
        return await ls.session.guard("workspaceSymbol", symbols.workspace_symbol, params, foreground=True)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_LINK)
    async def document_link(ls: GroundingServer, params: types.DocumentLinkParams) -> Any:
        return await ls.session.guard("documentLink", symbols.document_link, params, foreground=True)

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    async def inlay_hint(ls: GroundingServer, params: types.InlayHintParams) -> Any:
        return await ls.session.guard("inlayHint", hints.inlay_hint, params, foreground=True)

    @server.feature(types.TEXT_DOCUMENT_PREPARE_RENAME)
    async def prepare_rename(ls: GroundingServer, params: types.PrepareRenameParams) -> Any:
        return await ls.session.guard("prepareRename", rename.prepare_rename, params, foreground=True)

    @server.feature(types.TEXT_DOCUMENT_RENAME, types.RenameOptions(prepare_provider=True))
    async def rename_label(ls: GroundingServer, params: types.RenameParams) -> Any:
        return await ls.session.guard("rename", rename.rename, params, foreground=True)

    @server.feature(VERSION_TEXT)
    async def version_text(ls: GroundingServer, params: Any) -> dict[str, Any] | None:
        return await ls.session.guard(VERSION_TEXT, navigation.version_text, params, foreground=True)

    # editing
    @server.feature(types.TEXT_DOCUMENT_COMPLETION, completion.OPTIONS)
    async def complete(ls: GroundingServer, params: types.CompletionParams) -> types.CompletionList | None:
        return await ls.session.guard("completion", completion.completion, params, foreground=True)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, actions.OPTIONS)
    async def code_action(ls: GroundingServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        return await ls.session.guard("codeAction", actions.code_action, params, foreground=True)

    # commands (errors in their arguments reach the client as InvalidParams)
    @server.command("grounding.reindex")
    async def reindex(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard("grounding.reindex", commands.reindex, *args)

    @server.command("grounding.showConflicts")
    async def show_conflicts(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard("grounding.showConflicts", commands.show_conflicts, *args)

    @server.command("grounding.insertCitation")
    async def insert_citation(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard("grounding.insertCitation", commands.insert_citation, *args)

    @server.command("grounding.draftAnswer")
    async def draft_answer(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard("grounding.draftAnswer", commands.draft_answer, *args)

    @server.command("grounding.fixAll")
    async def fix_all(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard("grounding.fixAll", commands.fix_all, *args)

    @server.command(reference_lenses.SHOW_REFERENCES)
    async def show_references(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard(reference_lenses.SHOW_REFERENCES, reference_lenses.show_references, *args)

    @server.command("grounding.showContext")
    async def show_context(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard("grounding.showContext", commands.show_context, *args)

    # memory entries (SPEC §11): each asks the writer to confirm before it writes
    @server.command("grounding.rememberMemory")
    async def remember_memory(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard("grounding.rememberMemory", memory.remember, *args)

    @server.command("grounding.approveMemory")
    async def approve_memory(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard("grounding.approveMemory", memory.approve, *args)

    @server.command("grounding.forgetMemory")
    async def forget_memory(ls: GroundingServer, *args: Any) -> Any:
        return await ls.session.guard("grounding.forgetMemory", memory.forget, *args)


_EMPTY_REPORT = types.RelatedFullDocumentDiagnosticReport(items=[])


def build_server() -> GroundingServer:
    """Build a new, unstarted Grounding language server with every handler registered.

    Every call returns an independent server with its own session.
    """
    server = GroundingServer()
    _register(server)
    return server


def serve_stdio() -> int:
    """Run a server on stdin/stdout until ``exit``; the CLI's ``grounding lsp``.

    Returns the LSP exit code: 0 if ``shutdown`` came before ``exit`` (or the end of input),
    else 1.
    """
    heap.limit_arenas()  # before any thread starts (server/heap.py)
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)  # the loop gets the GIL sooner (server/session.py)
    server = build_server()
    server.start_io()
    return 0 if server.session.shutdown_requested else 1
