"""Starting the real server over stdio for the robustness suite (pytest-lsp, no fixtures).

:func:`start_server` runs ``python -m server`` (or any command) on a workspace and returns a
:class:`RecordingClient`, a pytest-lsp client that also keeps every ``publishDiagnostics``
with the time it arrived, so tests can count re-index passes and measure latencies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from .helpers import PYTHON, SERVER_ENV


@dataclass(frozen=True)
class Published:
    """One ``textDocument/publishDiagnostics`` as received."""

    at: float  # time.perf_counter()
    uri: str
    version: int | None
    diagnostics: list[types.Diagnostic]


class RecordingClient(LanguageClient):
    """A pytest-lsp client that records every publishDiagnostics (see :class:`Published`)."""

    published: list[Published]
    index_passes: list[float]
    """When each ``window/logMessage`` "Grounding: index pass" arrived (perf_counter)."""

    def passes_since(self, since: float) -> list[float]:
        return [t for t in self.index_passes if t >= since]

    def of(self, uri: str, since: float = 0.0) -> list[Published]:
        return [p for p in self.published if p.uri == uri and p.at >= since]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.perf_counter() + timeout
        while not predicate():
            if time.perf_counter() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            await asyncio.sleep(0.02)


def _recording_client() -> RecordingClient:
    client = RecordingClient(converter_factory=default_converter)
    client.published = []
    client.index_passes = []

    def publish(ls: RecordingClient, params: types.PublishDiagnosticsParams) -> None:
        ls.diagnostics[params.uri] = params.diagnostics
        ls.published.append(Published(time.perf_counter(), params.uri, params.version,
                                      list(params.diagnostics)))

    def log_message(ls: RecordingClient, params: types.LogMessageParams) -> None:
        if params.message.startswith("Grounding: index pass"):
            ls.index_passes.append(time.perf_counter())

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES,
                                   types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish,
                                   types.WINDOW_LOG_MESSAGE: log_message})
    return client


def push_capabilities() -> types.ClientCapabilities:
    """A minimal client: pushed diagnostics, work-done progress, no dynamic file watching
    (so every evidence change the server sees comes from its own watcher).
    """
    return types.ClientCapabilities(
        window=types.WindowClientCapabilities(work_done_progress=True),
        text_document=types.TextDocumentClientCapabilities(
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(related_information=True),
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
        ),
    )


async def start_server(root: Path, *, env: dict[str, str] | None = None,
                       command: list[str] | None = None) -> RecordingClient:
    """Start the server on ``root`` and finish ``initialize``/``initialized``."""
    config = ClientServerConfig(server_command=command or [PYTHON, "-m", "server"],
                                server_env={**SERVER_ENV, **(env or {})},
                                client_factory=_recording_client)
    client = await config.start()
    assert isinstance(client, RecordingClient)
    await client.initialize_session(types.InitializeParams(
        capabilities=push_capabilities(), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")]))
    return client


async def stop_server(client: LanguageClient) -> int | None:
    """``shutdown`` + ``exit``; returns the server's exit code."""
    try:
        await asyncio.wait_for(client.shutdown_session(), timeout=30)
    finally:
        await client.stop()
    process = client._server
    return process.returncode if process is not None else None


def open_document(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="markdown", version=version,
                                             text=text)))


def replace_document(client: LanguageClient, uri: str, text: str, version: int) -> None:
    """One full-text didChange (a range covering everything)."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=0, character=0),
                              end=types.Position(line=10_000, character=0)),
            text=text)]))


def names_of(diagnostics: list[types.Diagnostic]) -> list[str]:
    return [d.data["name"] if isinstance(d.data, dict) else str(d.code) for d in diagnostics]


def percentile(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]

