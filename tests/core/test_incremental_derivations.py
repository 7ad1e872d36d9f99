"""Speed paths give the same answers as the plain ones (see BENCHMARKS.md).

- ``IndexState.keyed_lines`` / ``known_terms`` of a state made by ``apply`` patch the previous
  state's indexes; they must equal a state replayed from scratch (SPEC §4 ``replay(n)``).
- Front matter goes through libyaml; on ordinary input it must read like pure PyYAML.
- The FTS rows of one document are replaced by rowid range (``fts_docs``); an index written
  before that table existed is rebuilt once on open.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from pathlib import Path

import pytest
import yaml

import grounding_core.evidence as evidence
from grounding_core.config import load_config
from grounding_core.state import Event, IndexState, ParseCache, ParseSettings
from grounding_core.store import Store

TODAY = dt.date(2026, 1, 1)
FIELDS = ["时间", "地点", "来源", "Fee", "ab"]
VALUES = ["周四16:30", "周四 16:30", "周四１６:３０", "x", "周三", "ab", ""]


def _text(rng: random.Random) -> str:
    lines = []
    if rng.random() < 0.3:
        lines += ["---", f"version: {rng.randint(1, 3)}"]
        if rng.random() < 0.15:
            lines.append("status: revoked")
        if rng.random() < 0.15:
            lines.append("effective_until: 2020-01-01")
        lines.append("---")
    subject = rng.choice(["A", "B", None])
    if subject:
        lines.append(f"主题：{subject}")
    for _ in range(rng.randint(0, 6)):
        lines.append(f"- {rng.choice(FIELDS)}：{rng.choice(VALUES)}")
    return "\n".join(lines) + "\n"


def test_patched_indexes_equal_a_fresh_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    patched = {"keyed": 0, "terms": 0, "fields": 0}
    patch_keyed = IndexState._patch_keyed

    def counting(self: IndexState, *args: object) -> object:
        patched["keyed"] += 1
        result = patch_keyed(self, *args)  # type: ignore[arg-type]
        patched["terms"] += bool(self._terms_base)
        patched["fields"] += bool(self._fields_base)
        return result

    monkeypatch.setattr(IndexState, "_patch_keyed", counting)
    rng = random.Random(20261129)
    cache = ParseCache(ParseSettings(("：", ":"), ("来源",), ("主题",)))
    for _ in range(150):
        events: list[Event] = []
        state = IndexState(cache=cache)
        seq = 0
        for _ in range(rng.randint(1, 10)):
            batch = []
            for _ in range(rng.randint(1, 2)):
                seq += 1
                doc_id = f"d{rng.randint(0, 9)}"
                version = rng.randint(1, 3)
                if rng.random() < 0.2:
                    batch.append(Event(seq, "revoke", doc_id, version, reason="deleted"))
                else:
                    text = _text(rng)
                    sha = hashlib.sha256(text.encode()).hexdigest()
                    batch.append(Event(seq, "import", doc_id, version, sha, f"{doc_id}.md", text))
            events += batch
            state = state.apply(batch)
            if rng.random() < 0.8:
                state.keyed_lines(TODAY)
                if rng.random() < 0.8:
                    state.known_terms(TODAY)
            fresh = IndexState(cache=cache).apply(events)
            assert state.keyed_lines(TODAY) == fresh.keyed_lines(TODAY)
            assert state.known_terms(TODAY) == fresh.known_terms(TODAY)
            for name in FIELDS:
                assert state.subjects_with_field(name, TODAY) == fresh.subjects_with_field(name, TODAY)
            assert state.field_names(TODAY) == fresh.field_names(TODAY)
    assert patched["keyed"] > 100 and patched["terms"] > 50 and patched["fields"] > 50


def _outcome(lines: list[str]) -> object:
    try:
        return evidence.parse_front_matter(lines)
    except evidence.EvidenceError as exc:
        return (exc.name, exc.message, exc.line, exc.hint)


def _kind(outcome: object) -> object:
    """A parsed front matter as is; a YAML syntax error by name only (the two loaders word
    their syntax errors differently).
    """
    if isinstance(outcome, tuple) and "not valid YAML" in str(outcome[1]):
        return outcome[0]
    return outcome


def test_libyaml_front_matter_reads_like_pure_pyyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """The libyaml loader (speed) and the pure-Python loader agree on random front matter.

    Tabs and U+0085 are left out of the alphabet: there the two disagree (libyaml refuses a
    trailing tab that pure PyYAML accepts), and Grounding follows libyaml when it is there.
    """
    rng = random.Random(9)
    keys = ["doc_id", "version", "title", "subject", "status", "effective_from",
            "effective_until", "other", "True", "_x"]
    first = ["a", "Z", "1", "0", "中", "😀", "2026-01-01", "12:30", "0x1", "n", "N", "y", "~",
             "'", '"', ".", "-", "[", "{", "#"]
    rest = ["a", " ", ":", "#", ",", "中", ".", "/", "ull", "e3", "-", "'", '"', "]", "}"]
    assert evidence.YAML_LOADER is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for _ in range(3000):
        body = [rng.choice(keys) + rng.choice([": ", ": ", ":", ":  "]) + rng.choice(first)
                + "".join(rng.choice(rest) for _ in range(rng.randint(0, 5)))
                for _ in range(rng.randint(1, 3))]
        lines = ["---", *body, "---"]
        quick = _kind(_outcome(lines))
        with monkeypatch.context() as m:
            m.setattr(evidence, "YAML_LOADER", yaml.SafeLoader)
            assert _kind(_outcome(lines)) == quick, body


def _fts(store: Store) -> list[tuple[str, int, int, str]]:
    rows = store._conn.execute("SELECT doc_id, version, line, text FROM lines_fts").fetchall()
    return sorted((r[0], int(r[1]), int(r[2]), r[3]) for r in rows)


def _expected_fts(state: IndexState) -> list[tuple[str, int, int, str]]:
    out = []
    for doc_id in state.doc_ids():
        newest = state.newest(doc_id)
        assert newest is not None
        doc = state.document(newest)
        out += [(doc_id, newest.version, i, text) for i, text in enumerate(doc.lines, 1)
                if text.strip() and not doc.is_front_matter_line(i)]
    return sorted(out)


def test_fts_rows_follow_edits_and_old_indexes_are_rebuilt(tmp_path: Path) -> None:
    evidence_root = tmp_path / "evidence"
    evidence_root.mkdir()
    for i in range(6):
        (evidence_root / f"d{i}.md").write_text(f"- 地点：{i}号楼\n- 时间：周{i}\n", encoding="utf-8")
    config = load_config(tmp_path)
    store = Store.for_config(config)
    store.scan(config)
    assert _fts(store) == _expected_fts(store.state)
    (evidence_root / "d2.md").write_text("- 地点：新楼\n\n- 费用：免费\n- 对象：全体\n", encoding="utf-8")
    (evidence_root / "d4.md").unlink()
    (evidence_root / "d9.md").write_text("- 地点：九号楼\n", encoding="utf-8")
    store.scan(config)
    assert _fts(store) == _expected_fts(store.state)
    assert [h.doc_id for h in store.search("新楼")] == ["d2"]
    # an index from before fts_docs: untracked rows, user_version 0 -> rebuilt on open
    store._conn.execute("DELETE FROM fts_docs")
    store._conn.execute("INSERT INTO lines_fts (text, doc_id, version, line) VALUES ('x', 'd0', 1, 1)")
    store._conn.execute("PRAGMA user_version = 0")
    store.close()
    store = Store.for_config(config)
    assert _fts(store) == _expected_fts(store.state)
    (evidence_root / "d0.md").write_text("- 地点：零号楼\n", encoding="utf-8")
    store.scan(config)
    assert _fts(store) == _expected_fts(store.state)
    store.close()


def test_field_lines_agree_with_parse_field_line() -> None:
    rng = random.Random(11)
    pieces = ["- ", "* ", "+ ", "-", " ", "：", ":", "::", "：:", "a", "中", "\t", "\u3000", "x y"]
    for _ in range(3000):
        separators = tuple(rng.sample(["：", ":", "::", "=", " - "], rng.randint(1, 3)))
        lines = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
                 for _ in range(rng.randint(1, 6))]
        text = "\n".join(lines)
        doc = evidence.parse_evidence_text("x.md", text, "0" * 64, separators)
        expected = {n: parsed for n, line in enumerate(doc.lines, 1)
                    if (parsed := evidence.parse_field_line(line, separators)) is not None}
        assert doc.field_lines == expected, (separators, lines)
