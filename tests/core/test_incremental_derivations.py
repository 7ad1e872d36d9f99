"""Speed paths give the same answers as the plain ones (see BENCHMARKS.md).

- ``IndexState.keyed_lines`` / ``known_terms`` of a state made by ``apply`` patch the previous
  state's indexes; they must equal a state replayed from scratch (SPEC §4 ``replay(n)``).
- Front matter goes through libyaml; on ordinary input it must read like pure PyYAML.
- FTS rows are built after the scan, for every content that is ever active; an index
  written by an older layout is migrated on open (its derived tables rebuilt from the log).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import sqlite3
from pathlib import Path

import pytest
import yaml

import grounding_core.evidence as evidence
from grounding_core.config import load_config
from grounding_core.sqlite_backend import LINE_BITS, LINE_MASK
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


def _fts(store: Store) -> list[tuple[int, int, str]]:
    """(content_id, line, text) of every FTS row."""
    rows = store.backend.reader().execute("SELECT rowid, text FROM lines_fts").fetchall()
    return sorted((int(r[0]) >> LINE_BITS, int(r[0]) & LINE_MASK, r[1]) for r in rows)


def _expected_fts(store: Store) -> list[tuple[int, int, str]]:
    """The non-blank body lines of every content that was ever active (SPEC §4 FTS rows
    answer any replay(n); docs/decisions.md "FTS over history").
    """
    out = []
    for event in store.events():
        if event.kind != "import":
            continue
        record = store.snapshot(at=event.seq).record(event.doc_id, event.version)
        assert record is not None
        snapshot = store.snapshot(at=event.seq)
        if snapshot.newest(event.doc_id) != record or record.revoked or record.status == "revoked":
            continue  # never active (an archive, or status: revoked)
        doc = snapshot.document(record)
        out += [(event.seq, i, text) for i, text in enumerate(doc.lines, 1)
                if text.strip() and not doc.is_front_matter_line(i)]
    return sorted(out)


OLD_LAYOUT = """
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('import', 'revoke')),
  doc_id TEXT NOT NULL, version INTEGER NOT NULL, sha256 TEXT NOT NULL DEFAULT '',
  path TEXT NOT NULL DEFAULT '', text TEXT NOT NULL DEFAULT '', declared INTEGER NOT NULL DEFAULT 0,
  reason TEXT NOT NULL DEFAULT '', recorded_at TEXT NOT NULL);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
  BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TABLE files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
  sha256 TEXT NOT NULL, doc_id TEXT, declared_version INTEGER, problem TEXT);
CREATE VIRTUAL TABLE lines_fts USING fts5(text, doc_id UNINDEXED, version UNINDEXED, line UNINDEXED,
  tokenize = 'trigram');
CREATE TABLE fts_docs (doc_id TEXT PRIMARY KEY, first_rowid INTEGER NOT NULL, last_rowid INTEGER NOT NULL);
PRAGMA user_version = 1;
"""


def test_fts_rows_are_built_after_the_scan_follow_edits_and_old_indexes_are_migrated(tmp_path: Path) -> None:
    evidence_root = tmp_path / "evidence"
    evidence_root.mkdir()
    for i in range(6):
        (evidence_root / f"d{i}.md").write_text(f"- 地点：{i}号楼\n- 时间：周{i}\n", encoding="utf-8")
    config = load_config(tmp_path)
    store = Store.for_config(config)
    result = store.scan(config)
    assert _fts(store) == [] and not result.snapshot.search_complete  # queued, not built yet
    assert store.fts_pending() == 6
    assert store.build_fts()
    assert result.snapshot.search_complete and store.fts_pending() == 0
    assert _fts(store) == _expected_fts(store)
    (evidence_root / "d2.md").write_text("- 地点：新楼\n\n- 费用：免费\n- 对象：全体\n", encoding="utf-8")
    (evidence_root / "d4.md").unlink()
    (evidence_root / "d9.md").write_text("- 地点：九号楼\n", encoding="utf-8")
    store.scan(config)
    store.build_fts()
    assert _fts(store) == _expected_fts(store)
    assert [h.doc_id for h in store.search("新楼")] == ["d2"]
    assert [h.doc_id for h in store.search("2号楼")] == []  # the old d2 is no longer active
    assert [h.doc_id for h in store.snapshot(at=6).search("2号楼")] == ["d2"]  # replay(6) is
    assert store.search("4号楼") == []  # deleted
    store.close()

    # an index written by the layout before derived tables: migrated on open, from the log
    old_db = tmp_path / "old.sqlite"
    with sqlite3.connect(old_db) as conn:
        conn.executescript(OLD_LAYOUT)
        for i in range(3):
            text = f"- 地点：{i}号楼\n"
            conn.execute("INSERT INTO events (kind, doc_id, version, sha256, path, text, declared, reason,"
                         " recorded_at) VALUES ('import', ?, 1, ?, ?, ?, 0, '', 'x')",
                         (f"old{i}", hashlib.sha256(text.encode()).hexdigest(), f"old{i}.md", text))
        conn.execute("INSERT INTO lines_fts (text, doc_id, version, line) VALUES ('x', 'old0', 1, 1)")
    migrated = Store(str(old_db), config_settings(config))
    try:
        assert migrated.snapshot().doc_ids() == ["old0", "old1", "old2"]
        assert migrated.snapshot().newest("old1").line_count == 1  # type: ignore[union-attr]
        assert [h.doc_id for h in migrated.search("1号楼")] == ["old1"]
        assert _fts(migrated) == _expected_fts(migrated)
        assert migrated.event_count() == 3
    finally:
        migrated.close()


def config_settings(config: object) -> ParseSettings:
    return ParseSettings(config.field_separators, config.meta_fields, config.subject_fields)  # type: ignore[attr-defined]


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
