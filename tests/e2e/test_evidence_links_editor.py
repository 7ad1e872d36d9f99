"""The editor names a symlinked evidence folder (SPEC §2; docs/decisions.md, "Evidence"):
the real server over stdio (pytest-lsp) publishes the note on the link, for a link present
at start and for one made while it runs (its own watcher sees it), and clears it when the
link is removed. CJK file names and evidence with emoji and CRLF.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from tests.support.lsp import names_of, start, stop
from tests.support.workspace import write_files


async def test_the_server_publishes_a_note_on_each_symlinked_folder(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    write_files(outside, {"secret.md": "- 地点：四楼\n"})
    write_files(root, {"grounding.toml": "", "evidence/real/a.md": "主题：开放日\r\n- 地点：二楼 🎉\r\n",
                       "资料/b.md": "- 地点：三楼 𠮷\r\n"})
    (root / "evidence" / "外部").symlink_to(outside, target_is_directory=True)
    client = await start(root, "minimal")
    try:
        outside_uri = (root / "evidence" / "外部").as_uri()
        published = await client.recorder.wait_publish(
            outside_uri, lambda p: names_of(p.diagnostics) == ["unreadable-evidence"], what="the link's note")
        [note] = published.diagnostics
        assert note.severity is types.DiagnosticSeverity.Warning
        assert "symlinked folder, not followed" in note.message and "outside the workspace" in note.message
        mark = client.recorder.mark()
        (root / "evidence" / "同一处").symlink_to(root / "evidence" / "real", target_is_directory=True)
        (root / "evidence" / "资料").symlink_to(root / "资料", target_is_directory=True)
        inside = await client.recorder.wait_publish(
            (root / "evidence" / "同一处").as_uri(), lambda p: bool(p.diagnostics), after=mark,
            what="a note on the link made while the server runs")
        assert inside.diagnostics[0].severity is types.DiagnosticSeverity.Information
        assert "evidence/real/" in inside.diagnostics[0].message
        elsewhere = await client.recorder.wait_publish(
            (root / "evidence" / "资料").as_uri(), lambda p: bool(p.diagnostics), after=mark)
        assert "资料/, outside the evidence folder, so its files were not read" in elsewhere.diagnostics[0].message
        mark = client.recorder.mark()
        (root / "evidence" / "外部").unlink()
        await client.recorder.wait_publish(outside_uri, lambda p: not p.diagnostics, after=mark,
                                           what="the note cleared once the link is gone")
    finally:
        await stop(client)
