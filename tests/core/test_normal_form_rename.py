"""An evidence file renamed between Unicode normal forms (NFD, as macOS spells file names, and
NFC) is a deleted doc_id and a new one (SPEC §3: the default doc_id is the path). A citation of
the old spelling is ``inactive-source`` saying the file was renamed, with the new spelling in
escapes, and carries an exact re-anchor (docs/decisions.md, "Checks"); the CLI's ``--fix``
writes it. Evidence is CJK with emoji and CRLF; both directions are covered.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import unicodedata

import pytest
from support import MakeWorkspace, only, sha256

from grounding_core.fixes import apply_edits

CONTENT = "主题：开放日 🎉\r\n- 地点：café 二楼 𠮷\r\n"
LINE = "- 地点：café 二楼 𠮷"


def draft(doc_id: str, version: int = 1) -> str:
    return ("---\r\nfields: [地点]\r\n---\r\n地点是café 二楼 𠮷[^1]。\r\n\r\n"
            f'[^1]: {doc_id}@{version}:2 sha256:{sha256(CONTENT)[:12]} "{LINE}"\r\n')


@pytest.mark.parametrize(("before", "after"), [("NFD", "NFC"), ("NFC", "NFD")])
def test_a_citation_of_the_old_spelling_names_the_rename_and_fixes_exactly(
        make_workspace: MakeWorkspace, before: str, after: str) -> None:
    old_id = unicodedata.normalize(before, "通知-café")
    new_id = unicodedata.normalize(after, "通知-café")
    ws = make_workspace({f"evidence/{old_id}.md": CONTENT, "answers/a.md": draft(old_id)})
    assert ws.check_file("answers/a.md").error_count == 0
    root = ws.config.evidence_root
    os.rename(root / f"{old_id}.md", root / f"{new_id}.md")
    time.sleep(0.15)  # the scan reads a file once it has been quiet for 100 ms
    ws.scan()
    report = ws.check_file("answers/a.md")
    finding = only(report, "inactive-source")
    form = "composed (NFC)" if after == "NFC" else "decomposed (NFD)"
    assert finding.message == (f"{old_id}@1 is not active: it was deleted; its file was renamed to"
                               f" evidence/{new_id}.md, which spells the doc_id {ascii(new_id)} with {form}"
                               " characters, with the same content")
    assert finding.hint.startswith(f"Cite {new_id}@1:2: the same line")
    assert finding.fix is not None
    text = (ws.config.root / "answers/a.md").read_bytes().decode("utf-8")
    fixed = apply_edits(text, [finding.fix])
    assert fixed == draft(new_id)
    clean = ws.check_text("answers/a.md", fixed)
    assert clean.error_count == 0, [f.message for f in clean.findings]


def test_grounding_check_fix_writes_the_new_spelling(make_workspace: MakeWorkspace) -> None:
    old_id, new_id = unicodedata.normalize("NFD", "通知-café"), unicodedata.normalize("NFC", "通知-café")
    ws = make_workspace({f"evidence/{old_id}.md": CONTENT, "answers/a.md": draft(old_id)})
    root = ws.config.evidence_root
    os.rename(root / f"{old_id}.md", root / f"{new_id}.md")
    time.sleep(0.15)
    ws.store.close()
    out = subprocess.run([sys.executable, "-m", "grounding.cli", "check", "--fix", "--root", str(ws.config.root)],
                         capture_output=True, text=True, encoding="utf-8", check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (ws.config.root / "answers/a.md").read_bytes() == draft(new_id).encode("utf-8")


def test_another_deleted_document_keeps_the_plain_hint(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/通知.md": CONTENT, "answers/a.md": draft("通知")})
    (ws.config.evidence_root / "通知.md").unlink()
    ws.scan()
    finding = only(ws.check_file("answers/a.md"), "inactive-source")
    assert finding.message == "通知@1 is not active: it was deleted"
    assert finding.fix is None
