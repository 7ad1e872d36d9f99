"""File names a Linux evidence folder can hold and a writer cannot see (README "What Grounding
guarantees"), through the real command line: a name holding a newline, a tab or an ESC keeps
each finding of the text report on one line; a doc_id that a macOS file name spells in NFD is
named as such when a draft types it in NFC (or the reverse), never "did you mean" itself.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from .helpers import sha256, write_files
from .test_hardening_adversary import grounding, workspace


def test_control_characters_in_names_keep_the_text_report_one_line_per_finding(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    write_files(ws, {"evidence/新\n行.md": "- 地点：礼堂 A 🎉\r\n", "answers/b\tc\x1b[31m.md": "活动时间是周四。\r\n"})
    proc = grounding(ws, "check")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("evidence/新\\n行.md:1:1: error GR204 invalid-front-matter") for line in lines), lines
    assert any(line.startswith("answers/b\\tc\\x1b[31m.md:1:1: ") for line in lines), lines
    assert any(line.startswith("answers/b\\tc\\x1b[31m.md: abstain") for line in lines), lines
    assert "\x1b" not in proc.stdout
    for line in lines:  # every line is a finding, a hint, a draft summary or the total
        assert (line.startswith(("evidence/", "answers/", "    hint: ")) or " draft(s): " in line), line
    report = json.loads(grounding(ws, "check", "--format", "json").stdout)  # JSON keeps the real names
    assert "answers/b\tc\x1b[31m.md" in [d["path"] for d in report["drafts"]]


def test_a_doc_id_spelled_in_another_normal_form_is_named(tmp_path: Path) -> None:
    nfd, nfc = unicodedata.normalize("NFD", "café-한글"), unicodedata.normalize("NFC", "café-한글")
    assert nfd != nfc
    line = "- 营业时间：周一 🎉"
    text = line + "\r\n"
    quote = f'[^1]: {nfc}@1:1 sha256:{sha256(text)[:12]} "{line}"\r\n'
    ws = workspace(tmp_path, **{f"evidence/{nfd}.md": text, "answers/b.md": f"营业时间是周一[^1]。\r\n\r\n{quote}"})
    proc = grounding(ws, "check", "answers/b.md", "--format", "json")
    (finding,) = [f for f in json.loads(proc.stdout)["drafts"][0]["diagnostics"] if f["name"] == "unknown-source"]
    assert f"doc_id '{nfc}' as written" in finding["message"]
    assert ascii(nfd) in finding["message"] and "decomposed (NFD" in finding["message"]
    assert "Did you mean" not in finding.get("hint", "")
    # the reverse: the evidence spells it NFC, the draft NFD
    ws = workspace(tmp_path / "reverse", **{f"evidence/{nfc}.md": text,
                                            "answers/b.md": f"营业时间是周一[^1]。\r\n\r\n{quote.replace(nfc, nfd)}"})
    proc = grounding(ws, "check", "answers/b.md", "--format", "json")
    (finding,) = [f for f in json.loads(proc.stdout)["drafts"][0]["diagnostics"] if f["name"] == "unknown-source"]
    assert "composed (NFC)" in finding["message"] and ascii(nfc) in finding["message"]
