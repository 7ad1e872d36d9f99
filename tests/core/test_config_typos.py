"""Configuration typos that used to pass silently (tryout5 #4), through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import event_kinds, write_files

from grounding import cli

EVIDENCE = {"evidence/规则🙂.md": "- 主题：退款\r\n- 退款方式：原路退还\r\n"}


def test_drafts_globs_matching_nothing_say_that_nothing_was_checked(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {**EVIDENCE, "grounding.toml": 'drafts = ["answer/**/*.md"]\n',
                           "answers/回答.md": "退款原路退还。\n"})
    code = cli.main(["check", "--root", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0
    assert "0 draft(s)" in out
    assert 'no draft matches drafts = ["answer/**/*.md"]' in err and "nothing was checked" in err


def test_drafts_found_print_no_such_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {**EVIDENCE, "grounding.toml": "", "answers/回答.md": "退款原路退还。\n"})
    cli.main(["check", "--root", str(tmp_path)])
    assert "no draft matches" not in capsys.readouterr().err


@pytest.mark.parametrize(("setting", "says"), [
    ("field_separators = []", 'field_separators must name at least one separator, e.g. ["："]'),
    ("evidence_globs = []", 'evidence_globs must name at least one glob, e.g. ["**/*.md"]'),
])
def test_an_empty_list_that_would_switch_checks_off_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, setting: str, says: str) -> None:
    write_files(tmp_path, {**EVIDENCE, "grounding.toml": setting + "\n"})
    assert cli.main(["check", "--root", str(tmp_path)]) == 2
    assert says in capsys.readouterr().err




def test_evidence_globs_matching_none_of_the_indexed_files_revoke_nothing(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A glob typo used to revoke every document (exit 0); now the scan refuses, exit 2, and
    the index keeps its last state until the globs are fixed (tryout5 #4).
    """
    write_files(tmp_path, {**EVIDENCE, "evidence/通知/开放日.md": "- 活动时间：9:30–16:00 🎉\n",
                           "grounding.toml": ""})
    assert cli.main(["index", "--root", str(tmp_path)]) == 0
    before = event_kinds(tmp_path)
    assert before.count("import") == 2
    (tmp_path / "grounding.toml").write_text('evidence_globs = ["**/*.mdx"]\n', encoding="utf-8")
    capsys.readouterr()
    for command in ("index", "check"):
        assert cli.main([command, "--root", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert "evidence_globs (**/*.mdx) match none of the 2 files in the evidence folder" in err
        assert "nothing was indexed and nothing revoked" in err and "Fix evidence_globs in grounding.toml" in err
    assert event_kinds(tmp_path) == before  # nothing appended
    (tmp_path / "grounding.toml").write_text('evidence_globs = ["**/*.md"]\n', encoding="utf-8")
    assert cli.main(["index", "--root", str(tmp_path)]) == 0
    assert event_kinds(tmp_path) == before  # the same files, the same state


def test_deleting_every_indexed_file_still_revokes_them_beside_other_files(tmp_path: Path) -> None:
    """The refusal is for files still there: deleted documents are revoked even when the folder
    keeps files no glob matches (a README.rst, an image sidecar).
    """
    write_files(tmp_path, {**EVIDENCE, "grounding.toml": ""})
    assert cli.main(["index", "--root", str(tmp_path)]) == 0
    (tmp_path / "evidence" / "规则🙂.md").unlink()
    (tmp_path / "evidence" / "说明.rst").write_text("不是证据\r\n", encoding="utf-8")
    assert cli.main(["index", "--root", str(tmp_path)]) == 0
    assert event_kinds(tmp_path) == ["import", "revoke"]


def test_one_surviving_file_among_many_deleted_still_refuses(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    """Every stored path counts, not a sample: 120 documents deleted, 3 kept (their paths sort
    last), wrong globs: refused (helper's break of a first-100 sample).
    """
    files = {f"evidence/archive/{i:03d}.md": f"- 编号：{i}\n" for i in range(120)}
    files.update({f"evidence/现行/{n}🎉.md": f"- 状态：有效{n}\r\n" for n in ("甲", "乙", "丙")})
    write_files(tmp_path, {**files, "grounding.toml": ""})
    assert cli.main(["index", "--root", str(tmp_path)]) == 0
    before = event_kinds(tmp_path)
    for i in range(120):
        (tmp_path / f"evidence/archive/{i:03d}.md").unlink()
    (tmp_path / "grounding.toml").write_text('evidence_globs = ["**/*.mdx"]\n', encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["index", "--root", str(tmp_path)]) == 2
    assert "match none of the 3 files in the evidence folder" in capsys.readouterr().err
    assert event_kinds(tmp_path) == before


def test_a_refused_file_matching_the_wrong_glob_does_not_switch_the_refusal_off(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {**EVIDENCE, "grounding.toml": ""})
    assert cli.main(["index", "--root", str(tmp_path)]) == 0
    before = event_kinds(tmp_path)
    (tmp_path / "evidence" / "旧.mdx").symlink_to(tmp_path / "nowhere.mdx")  # broken: refused (GR201)
    (tmp_path / "grounding.toml").write_text('evidence_globs = ["**/*.mdx"]\n', encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["index", "--root", str(tmp_path)]) == 2
    assert "match none of the 1 file in the evidence folder" in capsys.readouterr().err
    assert event_kinds(tmp_path) == before
