"""Image claims through the Python API (SPEC §12, §14, §15): ``grounding.verify`` of a JSON
answer with nine-key image claims against the hits a model was shown, on a PNG drawn with
Pillow and its CRLF sidecar.
"""

from __future__ import annotations

import hashlib
import io
import time
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

import grounding
from tests.support.workspace import write_files


def panel() -> bytes:
    image = Image.new("RGB", (400, 300), (255, 255, 255))
    pen = ImageDraw.Draw(image)
    pen.ellipse([20, 20, 55, 55], fill=(230, 30, 30))
    pen.rectangle([300, 24, 369, 93], fill=(30, 60, 220))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def answer(png: bytes, **changes: Any) -> dict[str, Any]:
    claim = {"text": "颜色：红色", "quote": "颜色：红色", "id": "面板@1#r1", "doc_id": "面板", "version": 1,
             "region": "r1", "sha256": hashlib.sha256(png).hexdigest(), "field": "颜色",
             "support_type": "measured", **changes}
    return {"status": "answered", "claims": [claim], "missing_fields": [], "fields": ["颜色"]}


def test_verify_checks_image_claims_against_the_hits(tmp_path: Path) -> None:
    png = panel()
    write_files(tmp_path, {"grounding.toml": 'today = "2026-05-01"\n', "evidence/面板.png": png,
                           "evidence/面板.png.yaml": "doc_id: 面板\r\nsubject: 控制面板\r\n"})
    time.sleep(0.15)
    with grounding.Verifier(tmp_path) as verifier:
        shown = [{"doc_id": "面板", "version": 1, "lines": [1, 5]}]  # r1's five attributes
        report = verifier.verify(answer(png), context=shown)
        assert report.ok and report.status == "answered", [d.name for d in report.diagnostics]
        other = verifier.verify(answer(png), context=[{"doc_id": "面板", "version": 1, "lines": [6, 10]}])
        assert "invisible-source" in [d.name for d in other.errors]
        wrong = verifier.verify(answer(png, quote="材质：塑料", text="材质：塑料", field="材质"), context=shown)
        assert [d.name for d in wrong.errors] == ["unsupported-attribute"]
        assert wrong.errors[0].pointer == "/claims/0/quote"
    model = grounding.Answer.model_validate(answer(png))
    assert isinstance(model.claims[0], grounding.ImageClaim)
