"""Navigation without a server: version URIs (server/protocol.py), targets, locations and
references (grounding_core/navigate.py), hover text (server/render/hover.py) (SPEC §10).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest

from grounding_core.config import Config
from grounding_core.drafts import parse_draft
from grounding_core.model import CitationRef, Span
from grounding_core.navigate import (
    CitationTarget,
    ContextTarget,
    RenameError,
    citation_links,
    citing_spans,
    label_at,
    locate,
    outline,
    references_of,
    rename_label,
    target_at,
)
from grounding_core.state import Event, IndexState, MemorySnapshot
from server.features.versions import VERSIONS_DIR, file_name, parse_version_file
from server.protocol import parse_version_uri, version_uri
from server.render.hover import citation_hover, numbered_lines

TODAY = dt.date(2026, 5, 1)
V1 = "---\nversion: 1\n---\n- a：1\n- b：2\n"
V2 = "---\nversion: 2\n---\n- b：2\n- a：3\n```x\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def state() -> MemorySnapshot:
    return MemorySnapshot(IndexState().apply([
        Event(1, "import", "events/day", 1, sha(V1), "old/day.md", V1, True),
        Event(2, "import", "events/day", 2, sha(V2), "events/day.md", V2, True),
    ]))


CONFIG = Config(root=Path("/ws"))


# ------------------------------------------------------------------------------ URIs


@pytest.mark.parametrize("doc_id", ["schedule", "events/open-day", "通知/𠮷野家🎉", "a%b#c?d"])
def test_version_uri_round_trips_and_keeps_doc_id_in_one_segment(doc_id: str) -> None:
    uri = version_uri(doc_id, 3)
    assert uri.startswith("grounding-evidence:/")
    assert "/" not in uri[len("grounding-evidence:/"):]
    assert parse_version_uri(uri) == (doc_id, 3)


def test_version_uri_encodes_slash_and_parses_client_reencodings() -> None:
    assert version_uri("events/open-day", 1) == "grounding-evidence:/events%2Fopen-day@1"
    assert parse_version_uri("grounding-evidence:/events/open-day%401") == ("events/open-day", 1)
    assert parse_version_uri("grounding-evidence:///events/open-day@1") == ("events/open-day", 1)
    assert parse_version_uri("file:///events/open-day@1") is None
    assert parse_version_uri("grounding-evidence:/events@01") is None


# --------------------------------------------------------------------------- targets


DRAFT = (
    "---\nquestion: q\ncontext:\n  units: [events/day@2]\nfields: [a]\n---\n"
    "a是3[^1]。`[^1]`\n\n"
    '[^1]: events/day@2:5 sha256:abcdef12 "- a：3"\n'
    '[^9]: events/day@1:4 sha256:abcdef12 "- a：1"\n'
    "[^8]: bad\n"
)


def test_markdown_targets_reference_definition_and_context_block() -> None:
    draft = parse_draft(DRAFT)
    ref = target_at(draft, 6, 5)
    assert isinstance(ref, CitationTarget) and ref.span == Span.line(6, 3, 7) and ref.used
    assert target_at(draft, 6, 7) == ref  # just after the reference
    assert target_at(draft, 6, 10) is None  # inside a code span: not a reference
    definition = target_at(draft, 8, 30)
    assert isinstance(definition, CitationTarget) and definition.span == Span.line(8, 6, 20)
    unused = target_at(draft, 9, 0)
    assert isinstance(unused, CitationTarget) and not unused.used
    assert unused.citation == CitationRef("events/day", 1, 4)
    assert target_at(draft, 10, 2) is None  # malformed: the diagnostic says why
    assert target_at(draft, 3, 4) == ContextTarget(Span(2, 0, 3, 23))
    assert target_at(draft, 2, 0) == ContextTarget(Span(2, 0, 3, 23))
    assert target_at(draft, 4, 0) is None
    assert target_at(draft, 99, 0) is None


# ----------------------------------------------------------------------------- hover


def test_numbered_lines_marks_the_cited_line_and_aligns_numbers() -> None:
    lines = [f"l{n}" for n in range(1, 12)]
    assert numbered_lines(lines, 10) == "   8 | l8\n   9 | l9\n> 10 | l10\n  11 | l11"
    assert numbered_lines(lines, 1, around=0) == "> 1 | l1"


def test_hover_of_unknown_version_line_and_never_indexed_version() -> None:
    index = state()

    def text(doc_id: str, version: int, line: int, quote: str | None = None) -> str:
        target = CitationTarget(Span.line(0, 0, 1), CitationRef(doc_id, version, line), "abcdef12", quote)
        return citation_hover(target, index, CONFIG, TODAY)

    assert "**Unknown version:** `events/day` has no version 7; the newest is version 2." in text("events/day", 7, 1)
    unknown_line = text("events/day", 2, 40)
    assert "**Unknown line:** `events/day@2` has 6 lines; line 40 does not exist." in unknown_line
    assert "the citation's `abcdef12` does not match" in unknown_line
    assert "- File: `evidence/events/day.md`" in unknown_line


def test_hover_fence_outgrows_backticks_in_the_evidence() -> None:
    index = state()
    target = CitationTarget(Span.line(0, 0, 1), CitationRef("events/day", 2, 5), sha(V2)[:12], None)
    hover = citation_hover(target, index, CONFIG, TODAY)
    assert "````text\n  3 | ---\n  4 | - b：2\n> 5 | - a：3\n  6 | ```x\n````" in hover
    assert "- Status: active" in hover


def test_never_indexed_old_version_uses_the_quote_for_the_current_line() -> None:
    index = MemorySnapshot(IndexState().apply([Event(1, "import", "d", 3, sha(V2), "d.md", V2, True)]))
    target = CitationTarget(Span.line(0, 0, 1), CitationRef("d", 1, 9), "abcdef12", "- a：3")
    hover = citation_hover(target, index, CONFIG, TODAY)
    assert "which was never indexed" in hover
    assert "Current line (version 3): the quoted text is line 5." in hover


# ----------------------------------------------------------------- location, references


def test_locate_opens_old_versions_and_changed_files_as_virtual_documents(tmp_path: Path) -> None:
    index = state()
    (tmp_path / "events").mkdir()
    (tmp_path / "events/day.md").write_text(V2)
    current = locate(CitationRef("events/day", 2, 4), index, tmp_path)
    assert current is not None and (current.record.path, current.line, current.on_disk) == ("events/day.md", 4, True)
    old = locate(CitationRef("events/day", 1, 4), index, tmp_path)
    assert old is not None and (old.record.version, old.on_disk) == (1, False)
    assert old.lines[old.line - 1] == "- a：1"
    (tmp_path / "events/day.md").write_text(V2 + "changed\n")
    changed = locate(CitationRef("events/day", 2, 4), index, tmp_path)
    assert changed is not None and not changed.on_disk
    assert locate(CitationRef("events/day", 2, 99), index, tmp_path) is None


def test_citing_spans_match_same_text_in_any_version() -> None:
    index = state()
    draft = parse_draft(
        "x是2[^1]。y是2[^2]。z是1[^3]。\n\n"
        '[^1]: events/day@1:5 sha256:abcdef12 "- b：2"\n'
        '[^2]: events/day@2:4 sha256:abcdef12 "- b：2"\n'
        '[^3]: events/day@1:4 sha256:abcdef12 "- a：1"\n'
    )
    assert citing_spans(draft, "events/day", 2, 4, "- b：2", index) == [Span.line(2, 6, 44), Span.line(3, 6, 44)]
    assert index.record_for_path("old/day.md") is not None
    assert index.record_for_path("nothing.md") is None


# ------------------------------------------------- version copies, outline, rename, hints (issue 12)


@pytest.mark.parametrize(("doc_id", "path", "name"), [
    ("returns-policy", "returns.md", "returns-policy@1.md"),
    ("events/open-day", "events/open-day.md", "events/open-day@1.md"),
    ("政策/退货🎉", "退货.txt", "政策/退货🎉@1.txt"),
    ("a/../b", "x.md", "a%2F..%2Fb@1.md"),  # never a path out of .grounding/versions
    ("100%\\new", "x.md", "100%25%5Cnew@1.md"),
])
def test_version_copy_names_read_back(tmp_path: Path, doc_id: str, path: str, name: str) -> None:
    assert file_name(doc_id, 1, path) == name
    copy = tmp_path / VERSIONS_DIR / name
    assert copy.resolve().is_relative_to((tmp_path / VERSIONS_DIR).resolve())
    assert parse_version_file(tmp_path, copy.as_uri()) == (doc_id, 1)
    assert parse_version_file(tmp_path, (tmp_path / "evidence" / name).as_uri()) is None


JSON_ANSWER = (
    '{"status": "answered", "claims": [\n'
    '  {"text": "𠮷：1", "quote": "- a：1", "id": "doc@1:4", "doc_id": "doc", "version": 1, "line": 4,'
    ' "sha256": "' + "0" * 64 + '", "field": "a"}\n'
    '], "missing_fields": []}\n'
)


def test_outline_and_links_of_a_json_answer() -> None:
    draft = parse_draft(JSON_ANSWER, "json")
    [item] = outline(draft)
    assert (item.name, item.detail, item.kind) == ("doc@1:4", "𠮷：1", "citation")
    assert draft.lines[item.selection.start_line][item.selection.start_col:item.selection.end_col] == '"doc@1:4"'
    [link] = citation_links(draft)
    assert link.citation == CitationRef("doc", 1, 4) and link.span == item.selection
    assert references_of(draft) == [] and label_at(draft, 1, 5) is None


def test_rename_label_refuses_what_would_break_the_draft() -> None:
    text = ("句子𠮷[^a]。再说[^b]，又说[^a]。不是引用\\[^a]。\r\n\r\n"
            '[^a]: doc@1:4 sha256:00 "- a：1"\r\n[^b]: doc@1:5 sha256:00 "- b：2"\r\n')
    draft = parse_draft(text)
    edits = rename_label(draft, "a", "🎉")
    assert [(e.span.start_line, draft.lines[e.span.start_line][e.span.start_col:e.span.end_col]) for e in edits] == [
        (0, "a"), (0, "a"), (2, "a")]  # two references and the definition; the escaped one is text
    assert {e.new_text for e in edits} == {"🎉"}
    with pytest.raises(RenameError, match="already used"):
        rename_label(draft, "a", "b")
    with pytest.raises(RenameError, match="not a valid footnote label"):
        rename_label(draft, "a", "a b")
    with pytest.raises(RenameError, match="not used"):
        rename_label(draft, "zzz", "y")
    assert rename_label(draft, "a", "[^a]") == []  # the same label, written with its brackets
