"""The recorder: every notification and request a server sent to a client, in arrival order,
with waits on conditions (no sleeping).

One recorder serves both harnesses: the pytest-lsp client of :mod:`tests.support.lsp` feeds
it from its handlers, and the in-process client port of :mod:`tests.support.inprocess` from
the session's calls. Each entry is a :class:`Notice` (arrival time, method, params); views
select publications, refresh requests, progress, log and status messages. Indices from
:meth:`Recorder.mark` and times (``time.perf_counter``) both delimit "what came after".
All methods run on the event loop of the client; waits are futures of that loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

__all__ = ["INDEX_PASS", "STATUS", "WAIT_SECONDS", "Notice", "Published", "Recorder", "plain"]

WAIT_SECONDS = 30.0
"""Upper bound for any wait on a server; a wait ends as soon as its condition holds."""
STATUS = "grounding/status"
INDEX_PASS = "Grounding: index pass"
"""The start of the server's log message after every scan."""


@dataclass(frozen=True)
class Notice:
    """One message from the server: ``at`` is ``time.perf_counter()`` on arrival."""

    at: float
    method: str
    params: Any


@dataclass(frozen=True)
class Published:
    """One ``textDocument/publishDiagnostics`` as received (with its arrival time)."""

    at: float
    uri: str
    version: int | None
    diagnostics: list[types.Diagnostic]


def plain(value: Any) -> Any:
    """Custom params and results arrive as namedtuple-like objects: make them plain JSON."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


class Recorder:
    """Everything a server sent, in arrival order (see the module docstring)."""

    def __init__(self) -> None:
        self.events: list[Notice] = []
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    # -- recording ----------------------------------------------------------------------

    def record(self, method: str, params: Any) -> None:
        self.events.append(Notice(time.perf_counter(), method, params))
        for check, future in list(self._waiters):
            if not future.done() and check():
                future.set_result(None)

    # -- views --------------------------------------------------------------------------

    def mark(self) -> int:
        """An index into :attr:`events`; pass it as ``after`` / ``since`` to see newer ones."""
        return len(self.events)

    def _of(self, method: str, after: int = 0) -> list[Any]:
        return [e.params for e in self.events[after:] if e.method == method]

    @property
    def publications(self) -> list[types.PublishDiagnosticsParams]:
        return self._of(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    def for_uri(self, uri: str, after: int = 0) -> list[types.PublishDiagnosticsParams]:
        """The publications for ``uri`` since index ``after``, oldest first."""
        return [p for p in self._of(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, after) if p.uri == uri]

    def published_uris(self, after: int = 0) -> list[str]:
        """The URIs of every publication since index ``after``, in arrival order."""
        return [p.uri for p in self._of(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, after)]

    def latest(self, uri: str) -> types.PublishDiagnosticsParams | None:
        found = self.for_uri(uri)
        return found[-1] if found else None

    def of(self, uri: str, since: float = 0.0) -> list[Published]:
        """The publications for ``uri`` that arrived at or after time ``since``."""
        return [Published(e.at, e.params.uri, e.params.version, list(e.params.diagnostics))
                for e in self.events if e.method == types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
                and e.params.uri == uri and e.at >= since]

    @property
    def refreshes(self) -> int:
        """How many ``workspace/diagnostic/refresh`` requests arrived."""
        return len(self._of(types.WORKSPACE_DIAGNOSTIC_REFRESH))

    @property
    def progress(self) -> list[types.ProgressParams]:
        return self._of(types.PROGRESS)

    @property
    def messages(self) -> list[types.ShowMessageParams]:
        return self._of(types.WINDOW_SHOW_MESSAGE)

    def passes_since(self, since: float) -> list[float]:
        """Arrival times of the server's "index pass" log messages at or after ``since``."""
        return [e.at for e in self.events if e.method == types.WINDOW_LOG_MESSAGE
                and e.params.message.startswith(INDEX_PASS) and e.at >= since]

    def statuses(self, uri: str, after: int = 0) -> list[dict[str, Any]]:
        """The ``grounding/status`` params for ``uri`` since index ``after`` (plain JSON)."""
        return [p for p in map(plain, self._of(STATUS, after)) if p.get("uri") == uri]

    # -- waits --------------------------------------------------------------------------

    async def wait_until(self, check: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS,
                         poll: float | None = None) -> None:
        """Return as soon as ``check()`` holds; fail the test after ``timeout`` seconds.

        ``check`` is tried on every new message; with ``poll`` also every ``poll`` seconds
        (for conditions on time, such as "no index pass for 1.5 s").
        """
        if check():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (check, future)
        self._waiters.append(entry)

        async def ticks() -> None:
            while poll is not None and not future.done():
                await asyncio.sleep(poll)
                if not future.done() and check():
                    future.set_result(None)

        ticker = asyncio.ensure_future(ticks())
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            seen = [(p.uri.rsplit("/", 1)[-1], p.version, [d.code for d in p.diagnostics])
                    for p in self.publications[-12:]]
            raise AssertionError(f"waited {timeout:.0f}s for {what}; last publications: {seen}") from None
        finally:
            ticker.cancel()
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
            for params in self.for_uri(uri, after):
                if predicate(params):
                    found.append(params)
                    return True
            return False

        await self.wait_until(check, what or f"a publication for {uri}", timeout)
        return found[0]

    async def wait_for(self, predicate: Callable[[str, Any], bool], since: int = 0,
                       timeout: float = WAIT_SECONDS, what: str = "") -> Any:
        """The params of the first message since index ``since`` with ``predicate(method, params)``."""
        found: list[Any] = []

        def check() -> bool:
            for event in self.events[since:]:
                if predicate(event.method, event.params):
                    found.append(event.params)
                    return True
            return False

        await self.wait_until(check, what or "a matching message", timeout)
        return found[0]

    async def wait_refresh(self, count: int, timeout: float = WAIT_SECONDS) -> None:
        """Wait until ``workspace/diagnostic/refresh`` arrived at least ``count`` times."""
        await self.wait_until(lambda: self.refreshes >= count, f"workspace/diagnostic/refresh #{count}", timeout)

    async def wait_status(self, uri: str, after: int = 0, timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        """The first ``grounding/status`` for ``uri`` since index ``after`` (plain JSON)."""
        await self.wait_until(lambda: bool(self.statuses(uri, after)), f"grounding/status for {uri}", timeout)
        return self.statuses(uri, after)[0]
