"""Findings of the third README tryout (tryout3), each through the real CLI on CJK/emoji/CRLF
evidence.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import sha256, write_files

from grounding import cli

V2 = "---\r\ndoc_id: 日程\r\nversion: 2\r\n---\r\n- 活动时间：10月18日 🎉\r\n"
V3 = "---\r\ndoc_id: 日程\r\nversion: 3\r\n---\r\n- 活动时间：10月19日 🎉\r\n"


def run(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main([argv[0], "--root", str(root), *argv[1:]])
    out, err = capsys.readouterr()
    return code, out, err


# -- 3. an accidental version bump undone with the original file ------------------------------


def test_a_version_bump_undone_names_the_evidence_file_not_a_revocation(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    draft = ("---\nfields: [活动时间]\nsubject: 日程\n---\n活动时间是10月18日 🎉[^1]。\n\n"
             f'[^1]: 日程@2:5 sha256:{sha256(V2)[:12]} "- 活动时间：10月18日 🎉"\n')
    write_files(tmp_path, {"grounding.toml": "", "evidence/日程 🎉.md": V2, "answers/a.md": draft})
    assert run(capsys, tmp_path, "check", "answers/a.md")[0] == 0
    write_files(tmp_path, {"evidence/日程 🎉.md": V3})  # the bump
    assert run(capsys, tmp_path, "index")[0] == 0
    write_files(tmp_path, {"evidence/日程 🎉.md": V2})  # undone: the original bytes again
    code, out, _ = run(capsys, tmp_path, "check", "answers/a.md")
    assert code == 1
    assert "(the evidence file 日程 🎉.md no longer holds it; see its findings)" in out
    assert "it is revoked (no longer indexed" not in out and "((" not in out.replace(" (", "(")
    assert "GR204" in out or "lower than version 3" in out  # the file's own finding says why
