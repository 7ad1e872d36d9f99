"""Image evidence (SPEC §12, §13) on a shared PostgreSQL index: the writer measures a PNG once,
and every reader checks region citations and answers measured-value questions from the shared
``field_lines`` (with the region's ``subject``), ``region_values`` and ``measurements``; an
index made before image evidence (no ``region_values``/``measurements``, ``field_lines``
without ``subject``, derived tables of definition 5) is rebuilt on open.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from pathlib import Path

import psycopg
import pytest
from PIL import Image, ImageDraw

from grounding_core.backend import DERIVED_VERSION
from grounding_core.config import load_config
from grounding_core.model import Status
from grounding_core.question import answer_question
from grounding_core.store import Store
from grounding_core.workspace import Workspace
from tests.postgres.test_shared_index import cli, settings_of, write

pytestmark = pytest.mark.postgres

SIDECAR = "\r\n".join(["# 面板示意图的元数据", "doc_id: 面板", "subject: 控制面板🎉", "title: 控制面板示意图", ""])
TODAY = "2026-05-01"


def panel() -> bytes:
    """White 400x300: r1 a small red circle (top left), r2 a medium blue square (top right),
    r3 a large green rectangle along the bottom.
    """
    image = Image.new("RGB", (400, 300), (255, 255, 255))
    pen = ImageDraw.Draw(image)
    pen.ellipse([20, 20, 55, 55], fill=(230, 30, 30))
    pen.rectangle([300, 24, 369, 93], fill=(30, 60, 220))
    pen.rectangle([20, 180, 379, 279], fill=(20, 170, 60))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def image_workspace(root: Path, png: bytes) -> Path:
    write(root, {"grounding.toml": f'today = "{TODAY}"\n',
                 "evidence/notice.md": "---\ndoc_id: notice\n---\n主题：开放日\r\n- 费用：免费 𠮷\r\n"})
    (root / "evidence/面板.png").write_bytes(png)
    (root / "evidence/面板.png.yaml").write_text(SIDECAR, encoding="utf-8", newline="")
    return root


def region_draft(png: bytes, region: str = "r1", quote: str = "颜色：红色",
                 sentence: str = "警示灯是红色的[^1]。") -> str:
    digest = hashlib.sha256(png).hexdigest()[:12]
    return "\r\n".join(["---", "question: 警示灯是什么颜色？", "fields: [颜色]", 'context: {units: ["面板@1"]}',
                        "---", sentence, "", f'[^1]: 面板@1#{region} sha256:{digest} "{quote}"', ""])


def test_a_reader_checks_an_image_citation_the_writer_measured(pg_url: str, tmp_path: Path) -> None:
    png = panel()
    root = image_workspace(tmp_path / "ws", png)
    writer = Store(pg_url, settings_of(root))
    try:
        scan = writer.scan(load_config(root))
        assert scan.writer is None and scan.measured == 1
        rows = writer.backend.reader().execute(
            "SELECT field, value, region FROM region_values ORDER BY region, field").fetchall()
        assert ("颜色", "红色", 1) in [tuple(r) for r in rows] and ("颜色", "蓝色", 2) in [tuple(r) for r in rows]
        subjects = writer.backend.reader().execute(
            "SELECT DISTINCT subject FROM field_lines WHERE subject IS NOT NULL ORDER BY subject").fetchall()
        assert [r[0] for r in subjects] == ["控制面板🎉#r1", "控制面板🎉#r2", "控制面板🎉#r3"]

        write(root, {"answers/a.md": region_draft(png)})
        write(root, {"answers/wrong.md": region_draft(png, "r2", "颜色：红色", "按钮是红色的[^1]。")})
        proc = cli("check", "--root", root, "--format", "json", env={"GROUNDING_INDEX": pg_url})
        assert proc.returncode == 1, proc.stderr  # a reader process: the writer holds the lock
        assert "writes the shared index" in proc.stderr
        drafts = {d["path"]: d for d in json.loads(proc.stdout)["drafts"]}
        assert drafts["answers/a.md"]["status"] == "answered"
        wrong = [d["name"] for d in drafts["answers/wrong.md"]["diagnostics"]]
        assert "quote-mismatch" in wrong  # r2 is blue: the measured value is named

        reader = Workspace.open(root, index=pg_url)
        try:
            assert reader.scan().writer is not None  # a reader: nothing measured or appended here
            snapshot = reader.store.snapshot()
            record = snapshot.newest("面板")
            assert record is not None and snapshot.measurement(record.sha256) is not None
            answer = answer_question(snapshot, reader.config, dt.date.fromisoformat(TODAY), "红色 小 圆形", reserve=400)
            assert answer.wire.status is Status.ANSWERED
            assert {c["id"] for c in answer.wire.claims} == {"面板@1#r1"}
            assert [c["quote"] for c in answer.wire.claims] == ["颜色：红色", "大小：小", "形状：圆形"]
        finally:
            reader.store.close()
        asked = cli("answer", "--root", root, "--question", "红色 小 圆形", "--reserve", "400", "--format", "json",
                    env={"GROUNDING_INDEX": pg_url})
        assert asked.returncode == 0, asked.stderr
        out = json.loads(asked.stdout)
        assert out["status"] == "answered"
        assert [(c["id"], c["quote"], c["support_type"]) for c in out["claims"]] == [
            ("面板@1#r1", "颜色：红色", "measured"), ("面板@1#r1", "大小：小", "measured"),
            ("面板@1#r1", "形状：圆形", "measured")]
    finally:
        writer.close()


def test_a_shared_index_from_before_image_evidence_is_rebuilt_on_open(pg_url: str, tmp_path: Path) -> None:
    """The memory-era layout (derived tables of definition 5, no image tables, the PNG never
    read, since PNGs were no evidence then): on open the derived tables are rebuilt, the image
    tables created, and the next scan measures the PNG; no evidence event is rewritten.
    """
    png = panel()
    root = image_workspace(tmp_path / "ws", png)
    moved = tmp_path / "later"
    moved.mkdir()
    for name in ("面板.png", "面板.png.yaml"):
        (root / "evidence" / name).rename(moved / name)
    store = Store(pg_url, settings_of(root))
    try:
        store.scan(load_config(root))
        before = [(e.seq, e.kind, e.doc_id, e.sha256) for e in store.events()]
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("DROP TABLE region_values")
        raw.execute("DROP TABLE measurements")
        raw.execute("ALTER TABLE field_lines DROP COLUMN subject")
        fingerprint = json.loads(raw.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()[0])
        fingerprint["definition"] = 5
        raw.execute("UPDATE meta SET value = %s WHERE key = 'fingerprint'", (json.dumps(fingerprint),))
    for name in ("面板.png", "面板.png.yaml"):
        (moved / name).rename(root / "evidence" / name)
    write(root, {"answers/a.md": region_draft(png)})
    proc = cli("check", "--root", root, "--format", "json", env={"GROUNDING_INDEX": pg_url})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["drafts"][0]["status"] == "answered"
    again = Store(pg_url, settings_of(root))
    try:
        events = [(e.seq, e.kind, e.doc_id, e.sha256) for e in again.events()]
        assert events[:len(before)] == before and [e[2] for e in events[len(before):]] == ["面板"]
        reader = again.backend.reader()
        assert reader.execute("SELECT COUNT(*) FROM region_values").fetchone()[0] > 0
        assert reader.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == 1
        definition = json.loads(reader.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()[0])
        assert definition["definition"] == DERIVED_VERSION
    finally:
        again.close()
