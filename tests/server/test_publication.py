"""Draft publications: related information converted once and serialised once (SPEC §7.4,
§10). The JSON the server writes must be exactly what lsprotocol's converter makes of the
same notification, whether a ``relatedInformation`` list is serialised afresh or reused.
"""

from __future__ import annotations

import json
import threading

from lsprotocol import types

from grounding_core.model import Finding, Location, Span
from server.app import PyglsClient, QueuedWriter, build_server
from server.convert import lsp_diagnostics
from server.positions import PositionCodec

LINES = ["活动时间是周四16:30[^1]。", "", "[^1]: 𠮷野家🎉@1:5 \"- 活动时间：周四16:30\"\r"]
RELATED = tuple(Location(f"evidence/来源{i}🎉.md", i + 1, f"活动时间：周{i}", f"- 活动时间：周{i} 𠮷")
                for i in range(7))


def findings(related: tuple[Location, ...]) -> list[Finding]:
    return [Finding("field-conflict", Span.line(0, 0, len(LINES[0])), "active sources disagree on '活动时间'",
                    hint="Correct or revoke one of the sources.", related=related),
            Finding("field-conflict", Span.line(2, 0, 8), "active sources disagree on '活动时间'", related=related),
            Finding("uncited-claim", Span.line(0, 0, 3), "no citation 🎉")]


def convert(related: tuple[Location, ...], lists: dict) -> list[types.Diagnostic]:  # type: ignore[type-arg]
    return lsp_diagnostics(findings(related), LINES, PositionCodec(), lambda rel: f"file:///ws/{rel}",
                           lambda rel: (), locations={}, related_lists=lists)


def test_equal_related_tuples_share_one_converted_list() -> None:
    lists: dict = {}  # type: ignore[type-arg]
    first = convert(RELATED, lists)
    again = convert(tuple(RELATED), lists)  # an equal tuple from another check
    assert first[0].related_information is first[1].related_information is again[0].related_information
    assert [r.location.range.end.character for r in first[0].related_information or ()] == [
        len(f"- 活动时间：周{i} 𠮷".encode("utf-16-le")) // 2 for i in range(7)]  # 𠮷: two units
    other = convert(RELATED[:3], lists)
    assert other[0].related_information is not first[0].related_information
    assert len(other[0].related_information or ()) == 3


def test_a_publication_is_serialised_exactly_like_lsprotocol_with_lists_reused() -> None:
    server = build_server()
    client = PyglsClient(server)
    lists: dict = {}  # type: ignore[type-arg]
    for version in (7, None, 8):  # the second and third reuse the serialised lists
        diagnostics = convert(RELATED, lists)
        prepared = client.prepare_diagnostics("file:///ws/answers/草稿🎉.md", version, diagnostics)
        header, _, body = prepared.partition(b"\r\n\r\n")
        assert int(header.split(b"\r\n")[0].split(b": ")[1]) == len(body)
        expected = types.PublishDiagnosticsNotification(params=types.PublishDiagnosticsParams(
            uri="file:///ws/answers/草稿🎉.md", version=version, diagnostics=diagnostics))
        assert json.loads(body) == json.loads(json.dumps(expected, default=server.protocol._serialize_message))
        assert body.isascii()
    assert len(client._related_json) == 1  # one list, serialised once


def test_an_empty_publication_clears_the_file() -> None:
    server = build_server()
    prepared = PyglsClient(server).prepare_diagnostics("file:///ws/evidence/a.md", None, [])
    body = json.loads(prepared.partition(b"\r\n\r\n")[2])
    assert body["params"] == {"uri": "file:///ws/evidence/a.md", "diagnostics": []}
    assert body["method"] == "textDocument/publishDiagnostics"


class Sink:
    """The stream under a QueuedWriter: records what was written, in order."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.wrote = threading.Event()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)
        self.wrote.set()

    def close(self) -> None:
        self.closed = True


def test_the_writer_sends_urgent_messages_first_and_bulk_ones_once_the_gate_lets_them() -> None:
    sink, entered, open_gate = Sink(), threading.Event(), threading.Event()
    sizes: list[int] = []

    def gate(size: int) -> None:  # Foreground.pause_output's place: blocks while a check runs
        sizes.append(size)
        entered.set()
        open_gate.wait()

    writer = QueuedWriter(sink, gate)
    writer.write_bulk("证据🎉 1".encode())
    entered.wait()  # the bulk message waits at the gate (a check runs)
    writer.write("草稿 𠮷".encode())  # the check's publication, queued meanwhile, goes first
    writer.write_bulk(b"evidence 2")
    assert sink.written == [] and writer.bulk_pending == 2
    open_gate.set()  # the check ended
    sink.wrote.wait()
    writer.close()  # flushes what is queued
    assert sink.written == ["草稿 𠮷".encode(), "证据🎉 1".encode(), b"evidence 2"]
    assert sizes[0] == len("证据🎉 1".encode()) and sink.closed and writer.bulk_pending == 0
