"""What a second fresh user found trying Grounding from its README (the ``tryout2`` pass):
each test runs the real CLI in-process on CJK, emoji and CRLF evidence and checks what a
writer reads (findings in /work/notes/tryout-findings.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import sha256, write_files

from grounding import cli

REFUND_V1 = "---\ndoc_id: refund\nversion: 1\n---\n- 主题：退款政策\n１．到账时间：7个工作日 🎉\n"
REFUND_V2 = "---\ndoc_id: refund\nversion: 2\n---\n- 主题：退款政策\n１．到账时间：3–5个工作日 🎉\n"


def run(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main([argv[0], "--root", str(root), *argv[1:]])
    out, err = capsys.readouterr()
    return code, out, err


# -- 7. --fix --at N would write fixes computed against a past state ---------------------------


def test_fix_with_at_is_refused_and_the_draft_is_not_written(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "", "evidence/refund.md": REFUND_V1})
    assert run(capsys, tmp_path, "index")[0] == 0
    # a wrong line number --fix would move, valid only against version 1
    draft = ("---\ncontext: {units: [\"refund@1\"]}\n---\n𠮷退款7个工作日 🎉到账[^1]。\n\n"
             f'[^1]: refund@1:5 sha256:{sha256(REFUND_V1)[:12]} "１．到账时间：7个工作日 🎉"\n')
    write_files(tmp_path, {"answers/x.md": draft})
    write_files(tmp_path, {"evidence/refund.md": REFUND_V2})
    assert run(capsys, tmp_path, "index")[0] == 0
    code, out, err = run(capsys, tmp_path, "check", "--fix", "--at", "1", "answers/x.md")
    assert code == 2 and out == ""
    assert "--fix cannot be combined with --at 1" in err and "without --at" in err
    assert (tmp_path / "answers" / "x.md").read_text(encoding="utf-8") == draft
    # --at alone still checks the past state, and --fix alone fixes against the present
    code, out, _ = run(capsys, tmp_path, "check", "--at", "1", "answers/x.md")
    assert code == 1 and "GR103" in out and "GR104" not in out
    code, _, err = run(capsys, tmp_path, "check", "--fix", "answers/x.md")
    assert "refund@1:5 → refund@1:6" in err or "Cite line 6" in err


# -- 8. a full-width colon after a front-matter key is named on its own line ------------------


@pytest.mark.parametrize(("front", "line", "key", "value"), [
    ("doc_id: bom-doc\r\nversion：1\r\n", 3, "version", "1"),           # CRLF, a BOM, after a good key
    ("status ：revoked\r\ndoc_id: x\r\n", 2, "status", "revoked"),      # a space before it, first line
    ("title︓退款规则🎉\r\n", 2, "title", "退款规则🎉"),                    # U+FE13, the only key
])
def test_a_full_width_colon_in_evidence_front_matter_names_the_line_and_the_character(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, front: str, line: int, key: str, value: str) -> None:
    evidence = "\ufeff---\r\n" + front + "---\r\n- 主题：门店\r\n- 营业时间：10:00–22:00\r\n"
    write_files(tmp_path, {"grounding.toml": "", "evidence/store.md": evidence.encode("utf-8"),
                           "evidence/ok.md": "- 主题：发货\n"})
    code, out, _ = run(capsys, tmp_path, "check")
    assert code == 1
    (finding,) = [ln for ln in out.splitlines() if ln.startswith("evidence/store.md:")]
    assert finding.startswith(f"evidence/store.md:{line}:1: error GR204 invalid-front-matter: ")
    assert "FULLWIDTH COLON" in finding or "VERTICAL COLON" in finding
    assert f"after the key '{key}' where YAML needs ':'" in finding
    assert f"Write it as '{key}: {value}'" in out
    assert "evidence/ok.md" not in out                                 # the rest is indexed as usual
    # the advice works
    write_files(tmp_path, {"evidence/store.md": evidence.replace(front, front.replace("：", ": ", 1)
                                                                 .replace(" ：", ": ").replace("︓", ": "))})
    code, out, _ = run(capsys, tmp_path, "check")
    assert code == 0 and "GR204" not in out


def test_a_value_holding_a_full_width_colon_is_still_read(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "",
                           "evidence/a.md": "---\ndoc_id: a\ntitle: 退款：规则\n---\n- 时间：周一\n"})
    code, out, _ = run(capsys, tmp_path, "cite", "a:5")
    assert code == 0 and out.startswith("[^1]: a@1:5 ")
