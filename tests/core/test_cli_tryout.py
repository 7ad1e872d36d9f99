"""What a fresh user found trying Grounding from its README (the ``fixes`` pass): each test
runs the CLI in-process on CJK, emoji and CRLF evidence and checks the message a writer reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import sha256, write_files

from grounding import cli

DECLARED = "---\ndoc_id: a\nversion: 1\n---\n- 时间：周一\n"
STRAY = "---\r\ndoc_id: a\r\n---\r\n- 时间：周二 🎉\r\n"


def run(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main([argv[0], "--root", str(root), *argv[1:]])
    out, err = capsys.readouterr()
    return code, out, err


# -- 2. a stray file sharing a declared doc_id ---------------------------------------------------


def test_a_stray_duplicate_that_supersedes_a_declared_version_is_named_in_stale_and_inactive_messages(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "", "evidence/b.md": DECLARED})
    assert run(capsys, tmp_path, "index")[0] == 0
    citation = f'[^1]: a@1:5 sha256:{sha256(DECLARED)[:12]} "- 时间：周一"'
    write_files(tmp_path, {"evidence/a.md": STRAY, "answers/x.md": f"时间是周一[^1]。\n\n{citation}\n"})
    code, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    (stale,) = [d for d in json.loads(out)["drafts"][0]["diagnostics"] if d["name"] == "stale-citation"]
    assert "evidence/a.md declares no version but shares doc_id 'a' with evidence/b.md" in stale["message"]
    assert "duplicate-doc-id" in stale["message"]
    assert "Declare `version: 3` in evidence/b.md" in stale["hint"]
    code, _, err = run(capsys, tmp_path, "cite", "a@1:5")
    assert code == 1 and "GR104" in err and "duplicate-doc-id" in err and "leave the version out" not in err

    (tmp_path / "evidence" / "a.md").unlink()
    code, _, err = run(capsys, tmp_path, "cite", "a:5")
    assert code == 1 and "GR106" in err and "it was deleted" in err
    assert "Declare `version: 3` in b.md" in err and "stays the newest known" in err
    # the advice works: a higher declared version makes the declared file's content current
    write_files(tmp_path, {"evidence/b.md": DECLARED.replace("version: 1", "version: 3")})
    code, out, _ = run(capsys, tmp_path, "cite", "a:5")
    assert code == 0 and out.startswith("[^1]: a@3:5 ") and "周一" in out
