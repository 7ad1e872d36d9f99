"""Shared pieces of the end-to-end suite: how the real server is started, and a client that
answers and records what the server sends (SPEC §10).

* :data:`SERVER_COMMAND` / :data:`SERVER_ENV` start ``python -m server`` from this checkout.
* Every pytest-lsp client answers ``client/registerCapability``,
  ``client/unregisterCapability`` and the ``workspace/*/refresh`` requests the way an editor
  does (with null). The server registers a ``workspace/didChangeWatchedFiles`` watcher when
  the client offers dynamic registration, and asks for a code-lens refresh when the client
  offers ``workspace.codeLens.refreshSupport`` (the VS Code profile offers both); pytest-lsp
  1.0.1 has no default handler for these requests, answers ``MethodNotFound`` and fails the
  running test. The handlers are added with pytest-lsp's own
  :func:`pytest_lsp.client.default_feature` hook, so every client built by
  ``make_test_lsp_client`` (all ``pytest_lsp.fixture`` clients) gets them.
* The ``lsp_session`` fixture opens a server session with a :class:`RecordingClient`, whose
  ``recorder`` keeps every ``textDocument/publishDiagnostics`` and ``$/progress`` in arrival
  order and counts ``workspace/diagnostic/refresh``, and lets a test wait for a condition on them
  (:meth:`Recorder.wait_publish`, :meth:`Recorder.wait_refresh`) instead of sleeping.
  pytest-lsp's own ``wait_for_notification`` keeps one waiter per method and no history,
  which cannot express "the publication of version 6 of this URI".

Test modules reach these through fixtures, not ``import conftest``: several test folders
have a ``conftest.py``, and which one ``import conftest`` finds depends on collection order.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, default_feature, register_lsp_features

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_COMMAND = [sys.executable, "-m", "server"]
SERVER_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
}
WAIT_SECONDS = 30.0
"""Upper bound for any wait on the server; a wait ends as soon as its condition holds."""


# ------------------------------------------------- editor-like defaults for every client


@default_feature(types.CLIENT_REGISTER_CAPABILITY)
def register_capability(ls: LanguageClient, params: types.RegistrationParams) -> None:
    """Accept a dynamic registration, as VS Code and Neovim do (the result is null)."""
    registered = _registrations(ls)
    registered.extend(params.registrations)


@default_feature(types.CLIENT_UNREGISTER_CAPABILITY)
def unregister_capability(ls: LanguageClient, params: types.UnregistrationParams) -> None:
    """Accept an unregistration (the result is null)."""
    gone = {u.id for u in params.unregisterations}
    registered = _registrations(ls)
    registered[:] = [r for r in registered if r.id not in gone]


REFRESH_REQUESTS = (
    types.WORKSPACE_CODE_LENS_REFRESH,
    types.WORKSPACE_SEMANTIC_TOKENS_REFRESH,
    types.WORKSPACE_INLAY_HINT_REFRESH,
    types.WORKSPACE_INLINE_VALUE_REFRESH,
    types.WORKSPACE_FOLDING_RANGE_REFRESH,
)
"""Refresh requests a client with the matching ``refreshSupport`` must answer (null)."""


def _accept_refresh(ls: LanguageClient, params: None) -> None:
    """Answer a ``workspace/*/refresh`` request; counted in ``ls.refresh_requests``."""
    ls.__dict__["refresh_requests"] = ls.__dict__.get("refresh_requests", 0) + 1


for _method in REFRESH_REQUESTS:
    default_feature(_method)(_accept_refresh)


def _registrations(ls: LanguageClient) -> list[types.Registration]:
    """The client's live dynamic registrations (kept on the client as ``registrations``)."""
    if not hasattr(ls, "registrations"):
        ls.registrations = []  # type: ignore[attr-defined]  # a test-only attribute
    return ls.registrations  # type: ignore[attr-defined, no-any-return]


# --------------------------------------------------------------------- recording client


class Recorder:
    """Everything the server pushed, in arrival order, with waits on conditions.

    Handlers run on the client's event loop, so no locking is needed; waiters are futures of
    the loop that calls :meth:`wait_until`.
    """

    def __init__(self) -> None:
        self.publications: list[types.PublishDiagnosticsParams] = []
        self.refreshes = 0
        self.progress: list[types.ProgressParams] = []
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    # -- recording (called by the client's handlers) -------------------------------------

    def published(self, params: types.PublishDiagnosticsParams) -> None:
        self.publications.append(params)
        self._wake()

    def refreshed(self) -> None:
        self.refreshes += 1
        self._wake()

    def progressed(self, params: types.ProgressParams) -> None:
        self.progress.append(params)
        self._wake()

    def _wake(self) -> None:
        for check, future in list(self._waiters):
            if not future.done() and check():
                future.set_result(None)

    # -- queries ------------------------------------------------------------------------

    def mark(self) -> int:
        """An index into :attr:`publications`; pass it as ``after`` to see only newer ones."""
        return len(self.publications)

    def for_uri(self, uri: str, after: int = 0) -> list[types.PublishDiagnosticsParams]:
        """The publications for ``uri`` since ``after``, oldest first."""
        return [p for p in self.publications[after:] if p.uri == uri]

    def latest(self, uri: str) -> types.PublishDiagnosticsParams | None:
        found = self.for_uri(uri)
        return found[-1] if found else None

    # -- waits --------------------------------------------------------------------------

    async def wait_until(self, check: Callable[[], bool], what: str,
                         timeout: float = WAIT_SECONDS) -> None:
        """Return as soon as ``check()`` holds; fail the test after ``timeout`` seconds."""
        if check():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (check, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            seen = [(p.uri.rsplit("/", 1)[-1], p.version, [d.code for d in p.diagnostics])
                    for p in self.publications[-12:]]
            raise AssertionError(f"waited {timeout:.0f}s for {what}; last publications: {seen}"
                                 ) from None
        finally:
            self._waiters.remove(entry)

    async def wait_publish(
        self,
        uri: str,
        predicate: Callable[[types.PublishDiagnosticsParams], bool] = lambda p: True,
        *,
        after: int = 0,
        what: str = "",
        timeout: float = WAIT_SECONDS,
    ) -> types.PublishDiagnosticsParams:
        """The first publication for ``uri`` since index ``after`` that satisfies ``predicate``."""
        found: list[types.PublishDiagnosticsParams] = []

        def check() -> bool:
            for params in self.publications[after:]:
                if params.uri == uri and predicate(params):
                    found.append(params)
                    return True
            return False

        await self.wait_until(check, what or f"a publication for {uri}", timeout)
        return found[0]

    async def wait_refresh(self, count: int, timeout: float = WAIT_SECONDS) -> None:
        """Wait until ``workspace/diagnostic/refresh`` arrived at least ``count`` times."""
        await self.wait_until(lambda: self.refreshes >= count,
                              f"workspace/diagnostic/refresh #{count}", timeout)


class RecordingClient(LanguageClient):
    """A pytest-lsp client whose :attr:`recorder` sees every diagnostics push and refresh."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = Recorder()


def _publish(ls: RecordingClient, params: types.PublishDiagnosticsParams) -> None:
    ls.diagnostics[params.uri] = params.diagnostics  # what pytest-lsp's default handler does
    ls.recorder.published(params)


def _refresh(ls: RecordingClient, params: None) -> None:
    ls.diagnostic_refresh_count += 1  # what pytest-lsp's default handler does
    ls.recorder.refreshed()


def _progress(ls: RecordingClient, params: types.ProgressParams) -> None:
    DEFAULT_CLIENT_FEATURES[types.PROGRESS](ls, params)  # fills ls.progress_reports
    ls.recorder.progressed(params)


def make_recording_client() -> RecordingClient:
    """A :class:`RecordingClient` with pytest-lsp's default handlers plus the recorders."""
    client = RecordingClient(converter_factory=default_converter)
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _publish
    features[types.WORKSPACE_DIAGNOSTIC_REFRESH] = _refresh
    features[types.PROGRESS] = _progress
    register_lsp_features(client, features)
    return client


RECORDING_CONFIG = ClientServerConfig(
    server_command=SERVER_COMMAND, server_env=SERVER_ENV, client_factory=make_recording_client
)
"""Start ``python -m server`` with a :class:`RecordingClient` attached."""


SessionFactory = Callable[..., contextlib.AbstractAsyncContextManager[RecordingClient]]


@contextlib.asynccontextmanager
async def _open_session(
    capabilities: types.ClientCapabilities, root: Path, **initialize: Any
) -> AsyncIterator[RecordingClient]:
    """Start ``python -m server``, initialize it on the workspace ``root`` and yield the client.

    The client gets ``initialize_result`` and ``root`` attributes. On exit, also when the test
    failed, the session is shut down (``shutdown`` + ``exit``); a server that does not exit
    within :data:`WAIT_SECONDS` is killed, so a failing test never hangs the run (pygls's
    ``stop()`` waits for the process without ending it).
    """
    client = await RECORDING_CONFIG.start()
    assert isinstance(client, RecordingClient)
    try:
        params = types.InitializeParams(
            capabilities=capabilities,
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            **initialize,
        )
        client.initialize_result = await asyncio.wait_for(  # type: ignore[attr-defined]
            client.initialize_session(params), WAIT_SECONDS)
        client.root = root  # type: ignore[attr-defined]
        yield client
    finally:
        await _end(client)


async def _end(client: LanguageClient) -> None:
    """Shut the server down politely, or kill it; then stop the client."""
    process = client._server
    if process is not None and process.returncode is None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), WAIT_SECONDS)
        if process.returncode is None:
            process.kill()
    await client.stop()


@pytest.fixture(scope="session")
def lsp_session() -> SessionFactory:
    """A factory of recording server sessions: ``async with factory(caps, root) as client``.

    Session-scoped and loop-free (it returns the context-manager function), so fixtures of any
    scope and any event loop can use it.
    """
    return _open_session


@pytest.fixture(scope="session")
def server_env() -> dict[str, str]:
    """The environment the server runs in: this checkout first on ``PYTHONPATH``."""
    return dict(SERVER_ENV)
