#!/usr/bin/env python3
"""Generate the example image evidence: ``examples/evidence/images/shapes.png`` and its sidecar.

    python3 examples/scripts/make_shapes.py           # (re)write both files
    python3 examples/scripts/make_shapes.py --check   # exit 1 if the committed files differ

The picture is a sketch of a device's control panel (640x400 pixels, white background):
a red warning light and a green power light (small circles), a yellow warning sign
(a medium triangle) in the top row; a blue display (a large rectangle) and a black button
(a medium square) in the bottom row. The top edges within each row differ by a few pixels,
so the reading order (SPEC §15) puts them in one row each.

Deterministic: every shape is drawn at four times the size and downsampled with LANCZOS (the
anti-aliased edges a real export has), with fixed coordinates and no randomness; Pillow
writes no timestamp. ``--check`` compares pixels (a newer zlib may compress the same pixels
to other bytes) and the sidecar byte for byte.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from PIL import Image, ImageChops, ImageDraw

OUT = Path(__file__).resolve().parents[1] / "evidence" / "images"
PNG = OUT / "shapes.png"
SIDECAR = OUT / "shapes.png.yaml"
SIZE = (640, 400)
SCALE = 4

SIDECAR_TEXT = """\
# Metadata of shapes.png (SPEC §12): the front-matter keys of SPEC §3, as a plain YAML mapping.
doc_id: shapes
subject: 设备面板
title: 设备控制面板示意图
version: 1
"""


def draw() -> Image.Image:
    """The panel, anti-aliased: drawn at ``SCALE`` times the size, then downsampled."""
    w, h = SIZE
    big = Image.new("RGB", (w * SCALE, h * SCALE), (255, 255, 255))
    pen = ImageDraw.Draw(big)

    def box(x0: float, y0: float, x1: float, y1: float) -> list[float]:
        return [x0 * SCALE, y0 * SCALE, x1 * SCALE - 1, y1 * SCALE - 1]

    pen.ellipse(box(48, 48, 96, 96), fill=(230, 30, 30))        # warning light
    pen.ellipse(box(136, 50, 184, 98), fill=(20, 170, 60))      # power light
    pen.polygon([(460 * SCALE, 40 * SCALE), (530 * SCALE, 160 * SCALE), (390 * SCALE, 160 * SCALE)],
                fill=(250, 200, 0))                              # warning sign
    pen.rectangle(box(48, 230, 348, 350), fill=(30, 80, 200))   # display
    pen.rectangle(box(440, 236, 530, 326), fill=(30, 30, 30))   # button
    return big.resize(SIZE, Image.Resampling.LANCZOS)


def encode(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files")
    args = parser.parse_args(argv)
    image = draw()
    if args.check:
        problems = []
        if not PNG.exists():
            problems.append(f"{PNG} is missing")
        else:
            with Image.open(PNG) as committed:
                same = committed.convert("RGB").size == image.size and ImageChops.difference(
                    committed.convert("RGB"), image).getbbox() is None
            if not same:
                problems.append(f"{PNG} has other pixels than the script draws")
        if not SIDECAR.exists() or SIDECAR.read_text(encoding="utf-8") != SIDECAR_TEXT:
            problems.append(f"{SIDECAR} differs from the script's text")
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    OUT.mkdir(parents=True, exist_ok=True)
    PNG.write_bytes(encode(image))
    SIDECAR.write_text(SIDECAR_TEXT, encoding="utf-8", newline="\n")
    print(f"wrote {PNG} and {SIDECAR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
