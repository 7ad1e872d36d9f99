"""The image citation hover without a server (server/render/image_hover.py, SPEC §10, §12),
against a real store: PNGs drawn with Pillow, a re-saved image (a stale citation whose old
pixels are gone), an unknown region, a text document cited as an image.
"""

from __future__ import annotations

import base64
import io
import re
import time
from pathlib import Path

from PIL import Image, ImageDraw

from grounding_core.model import RegionRef, Span
from grounding_core.navigate import RegionTarget, version_bytes
from grounding_core.workspace import Workspace
from server.render.image_hover import CROP_MAX_SIDE, region_hover
from tests.support.workspace import sha256, write, write_files


def picture(colour: tuple[int, int, int], size: tuple[int, int] = (400, 300)) -> bytes:
    image = Image.new("RGB", size, (255, 255, 255))
    pen = ImageDraw.Draw(image)
    pen.ellipse([20, 20, 55, 55], fill=colour)
    pen.rectangle([size[0] - 100, 24, size[0] - 31, 93], fill=(30, 60, 220))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def target(region: str, quote: str, version: int = 1) -> RegionTarget:
    return RegionTarget(Span.line(0, 0, 1), RegionRef("面板", version, int(region[1:])), "0" * 12, quote)


def open_workspace(tmp_path: Path, files: dict[str, str | bytes]) -> Workspace:
    write_files(tmp_path, {"grounding.toml": 'today = "2026-05-01"\n', **files})
    time.sleep(0.15)
    ws = Workspace.open(tmp_path)
    ws.scan()
    return ws


def crop_of(text: str) -> Image.Image:
    match = re.search(r"\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", text)
    assert match is not None, text[:200]
    return Image.open(io.BytesIO(base64.b64decode(match[1])))


def test_the_hover_crops_the_region_and_lists_its_attributes(tmp_path: Path) -> None:
    red = picture((230, 30, 30), size=(2000, 1500))
    ws = open_workspace(tmp_path, {"evidence/面板.png": red, "evidence/面板.png.yaml": "title: 面板 *示意* 图\r\n"})
    try:
        snapshot = ws.store.snapshot()
        record = snapshot.record("面板", 1)
        assert record is not None
        png = version_bytes(ws.config.evidence_root, record)
        assert png == red
        text = region_hover(target("r2", "颜色：蓝色"), snapshot, ws.config, ws.today(), png)
        assert text.startswith("**面板 \\*示意\\* 图** · `面板@1#r2`")
        crop = crop_of(text)
        assert max(crop.size) <= CROP_MAX_SIDE and crop.size == (78, 78)  # the 70x70 square plus 4 a side
        assert "- **颜色：蓝色** ← quoted" in text and "- 形状：正方形" in text
        wrong = region_hover(target("r1", "颜色：绿色"), snapshot, ws.config, ws.today(), png)
        assert "← quoted as `颜色：绿色`, which is not what is measured" in wrong
        assert "- Status: active" in wrong
        missing = region_hover(target("r7", "颜色：红色"), snapshot, ws.config, ws.today(), png)
        assert "**Unknown region:** the image has 2 measured region(s); there is no r7." in missing
        assert "- r1: 红色 圆形 小 at 20,20,36,36" in missing
    finally:
        ws.store.close()


def test_a_stale_image_citation_shows_the_newest_measurement_and_no_old_pixels(tmp_path: Path) -> None:
    ws = open_workspace(tmp_path, {"evidence/面板.png": picture((230, 30, 30))})
    try:
        write(tmp_path, "evidence/面板.png", picture((20, 170, 60)))
        time.sleep(0.15)
        ws.scan()
        snapshot = ws.store.snapshot()
        old = snapshot.record("面板", 1)
        assert old is not None and snapshot.newest("面板").version == 2  # type: ignore[union-attr]
        assert version_bytes(ws.config.evidence_root, old) is None  # the file holds version 2 now
        text = region_hover(target("r1", "颜色：红色"), snapshot, ws.config, ws.today(), None)
        assert "**Stale citation:** version 1 is cited; the newest is version 2." in text
        assert "its pixels cannot be shown" in text and "data:image" not in text
        assert "- **颜色：红色** ← quoted" in text  # version 1 measured red
        assert "Newest version 2, r1: 位置：20,20,36,36, 面积：" in text and "颜色：绿色" in text
        assert sha256(picture((20, 170, 60)))[:12] not in text.split("Newest")[0]
    finally:
        ws.store.close()


def test_a_text_document_cited_with_a_region_says_it_has_lines(tmp_path: Path) -> None:
    ws = open_workspace(tmp_path, {"evidence/note.md": "---\ndoc_id: 面板\n---\n- 颜色：红色\n"})
    try:
        text = region_hover(target("r1", "颜色：红色"), ws.store.snapshot(), ws.config, ws.today(), None)
        assert text.startswith("**Not an image:** `面板@1` is a text document")
    finally:
        ws.store.close()
