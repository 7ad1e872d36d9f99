"""Configuration typos that used to pass silently (tryout5 #4), through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import write_files

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
