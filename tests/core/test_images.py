"""Image evidence measurement and sidecars (SPEC §12, §15 "§12 images"): grounding_core.images.

Every image is drawn with Pillow inside the test: crisp shapes at known positions, the same
shapes anti-aliased (drawn at 4x and downsampled with LANCZOS), transparent backgrounds, and
a photo-like picture (a gradient with gaussian noise and specks). Positions are ``x,y,w,h``
in pixels, origin top-left; areas count pixels.
"""

from __future__ import annotations

import io
import json
import math
import re
import subprocess
import sys
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw, PngImagePlugin
from support import EXAMPLE_EVIDENCE, REPO

from grounding_core.evidence import EvidenceError
from grounding_core.images import (
    MEASUREMENT_VERSION,
    ImageError,
    Measurement,
    Region,
    attribute_lines,
    crop_png,
    decode_png,
    image_doc_id,
    image_subject,
    measure,
    measured_fields,
    measured_words,
    nearest_color,
    parse_sidecar,
    reading_order,
    sidecar_path,
    size_class,
)

RED, BLUE, GREEN, YELLOW = (255, 0, 0), (0, 0, 255), (0, 160, 0), (255, 215, 0)
Shape = tuple[str, tuple[float, float, float, float], tuple[int, int, int]]
"""(kind, (x0, y0, x1, y1) with x1/y1 exclusive, colour): kind is circle, box or triangle
(apex at the top middle), or diamond, star, ring, ellipse."""


def draw(size: tuple[int, int], shapes: Sequence[Shape], *, background: tuple[int, ...] = (255, 255, 255),
         scale: int = 1, mode: str = "RGB") -> Image.Image:
    """Shapes on a plain background; ``scale`` > 1 draws that much larger and downsamples with
    LANCZOS, which anti-aliases every edge.
    """
    big = Image.new(mode, (size[0] * scale, size[1] * scale), background)
    pen = ImageDraw.Draw(big)
    for kind, (x0, y0, x1, y1), colour in shapes:
        x0, y0, x1, y1 = x0 * scale, y0 * scale, x1 * scale - 1, y1 * scale - 1
        fill = colour if mode == "RGB" else (*colour, 255)
        cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
        if kind == "circle" or kind == "ellipse":
            pen.ellipse([x0, y0, x1, y1], fill=fill)
        elif kind == "box":
            pen.rectangle([x0, y0, x1, y1], fill=fill)
        elif kind == "triangle":
            pen.polygon([(cx, y0), (x1, y1), (x0, y1)], fill=fill)
        elif kind == "diamond":
            pen.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=fill)
        elif kind == "star":
            pen.polygon([(cx + (rx if i % 2 == 0 else rx * 0.45) * math.cos(i * math.pi / 5 - math.pi / 2),
                          cy + (ry if i % 2 == 0 else ry * 0.45) * math.sin(i * math.pi / 5 - math.pi / 2))
                         for i in range(10)], fill=fill)
        elif kind == "ring":
            pen.ellipse([x0, y0, x1, y1], fill=fill)
            pen.ellipse([x0 + rx * 0.5, y0 + ry * 0.5, x1 - rx * 0.5, y1 - ry * 0.5], fill=background)
        else:
            raise AssertionError(kind)
    return big.resize(size, Image.Resampling.LANCZOS) if scale > 1 else big


def png(image: Image.Image, **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", **options)
    return out.getvalue()


def summary(m: Measurement) -> list[tuple[str, str, str, str]]:
    """(name, colour, shape, size) of every region, in the image's language."""
    return [(r.name, r.attributes[2][1], r.attributes[3][1], r.attributes[4][1]) for r in m.regions]


CANVAS = (800, 600)
"""480,000 pixels: below 4,800 (1 %) is small, from 24,000 (5 %) large."""
BASIC: list[Shape] = [
    ("circle", (20, 20, 80, 80), RED),          # 2,827 pixels: small
    ("box", (120, 20, 180, 80), BLUE),          # 3,600: small
    ("box", (220, 30, 340, 80), GREEN),         # 6,000: medium
    ("triangle", (380, 20, 450, 80), YELLOW),   # 2,100: small
]


# ------------------------------------------------------------------ shapes and colours


def test_crisp_shapes_measure_their_position_area_colour_shape_and_size() -> None:
    m = measure(png(draw(CANVAS, BASIC)))
    assert (m.width, m.height, m.background, m.version) == (800, 600, (252, 252, 252), MEASUREMENT_VERSION)
    assert summary(m) == [("r1", "红色", "圆形", "小"), ("r2", "蓝色", "正方形", "小"),
                          ("r3", "绿色", "长方形", "中"), ("r4", "黄色", "三角形", "小")]
    circle, square, rectangle, triangle = m.regions
    assert attribute_lines(square) == ("位置：120,20,60,60", "面积：3600", "颜色：蓝色", "形状：正方形", "大小：小")
    assert attribute_lines(rectangle)[:2] == ("位置：220,30,120,50", "面积：6000")
    assert circle.bbox == (20, 20, 60, 60) and abs(circle.area - math.pi * 30**2) < 0.02 * math.pi * 30**2
    assert triangle.bbox == (380, 20, 70, 60) and abs(triangle.area - 70 * 60 / 2) < 0.05 * 70 * 60 / 2
    assert circle.mean_rgb == RED and square.mean_rgb == BLUE


def test_anti_aliased_shapes_measure_like_the_crisp_ones() -> None:
    crisp = measure(png(draw(CANVAS, BASIC)))
    smooth = measure(png(draw(CANVAS, BASIC, scale=4)))
    assert summary(smooth) == summary(crisp)
    for a, b in zip(crisp.regions, smooth.regions, strict=True):
        assert all(abs(p - q) <= 1 for p, q in zip(a.bbox, b.bbox, strict=True)), (a.bbox, b.bbox)
        assert abs(a.area - b.area) <= 0.04 * a.area
        assert a.mean_rgb == b.mean_rgb  # the interior: blended edge pixels are left out


@pytest.mark.parametrize("side", [12, 16, 24, 48, 120, 300])
@pytest.mark.parametrize("kind, shape", [("circle", "圆形"), ("box", "正方形"), ("triangle", "三角形")])
def test_shapes_keep_their_name_at_every_size_when_anti_aliased(kind: str, shape: str, side: int) -> None:
    image = draw((side + 40, side + 40), [(kind, (20, 20, 20 + side, 20 + side), RED)], scale=4)
    m = measure(png(image))
    assert [r.value("形状") for r in m.regions] == [shape]


@pytest.mark.parametrize("kind", ["diamond", "star", "ring", "ellipse"])
def test_other_shapes_are_other(kind: str) -> None:
    box = (20, 20, 140, 90 if kind == "ellipse" else 140)
    m = measure(png(draw((160, 160), [(kind, box, BLUE)], scale=4)))
    assert [(r.value("形状"), r.value("颜色")) for r in m.regions] == [("其他", "蓝色")]


def test_a_rotated_triangle_is_still_a_triangle_and_a_rotated_square_is_other() -> None:
    base = draw((200, 200), [("triangle", (50, 50, 150, 140), GREEN), ], scale=4)
    square = draw((200, 200), [("box", (60, 60, 140, 140), GREEN)], scale=4)
    for angle in (17, 40, 100):
        turned = base.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=(255, 255, 255))
        assert [r.shape for r in measure(png(turned)).regions] == ["triangle"], angle
    turned = square.rotate(45, resample=Image.Resampling.BICUBIC, fillcolor=(255, 255, 255))
    assert [r.shape for r in measure(png(turned)).regions] == ["other"]


def test_pure_red_is_red_and_the_palette_names_common_colours() -> None:
    expected = {
        (255, 0, 0): "red", (139, 0, 0): "red", (220, 20, 60): "red", (255, 165, 0): "orange",
        (255, 140, 0): "orange", (255, 255, 0): "yellow", (255, 215, 0): "yellow",
        (0, 255, 0): "green", (0, 128, 0): "green", (34, 139, 34): "green", (0, 255, 255): "cyan",
        (0, 128, 128): "cyan", (0, 0, 255): "blue", (0, 0, 128): "blue", (30, 144, 255): "blue",
        (70, 130, 180): "blue", (128, 0, 128): "purple", (75, 0, 130): "purple",
        (255, 0, 255): "purple", (255, 192, 203): "pink", (255, 105, 180): "pink",
        (139, 69, 19): "brown", (0, 0, 0): "black", (30, 30, 30): "black", (255, 255, 255): "white",
        (245, 245, 245): "white", (128, 128, 128): "gray", (105, 105, 105): "gray",
        (192, 192, 192): "gray",
    }
    assert {rgb: nearest_color(rgb) for rgb in expected} == expected


def test_the_measured_colour_is_the_regions_mean_colour_named_in_the_palette() -> None:
    m = measure(png(draw((200, 120), [("box", (20, 20, 80, 80), (200, 30, 30)),
                                      ("box", (120, 20, 180, 80), (250, 120, 10))])))
    assert [(r.mean_rgb, r.value("颜色")) for r in m.regions] == [((200, 30, 30), "红色"),
                                                                 ((250, 120, 10), "橙色")]


def test_sizes_are_relative_to_the_image_with_documented_boundaries() -> None:
    assert [size_class(a, 10_000) for a in (0, 99, 100, 499, 500, 10_000)] == [
        "small", "small", "medium", "medium", "large", "large"]
    # 400x250 = 100,000 pixels: 20x20 = 0.4 % small, 50x50 = 2.5 % medium, 80x80 = 6.4 % large
    m = measure(png(draw((400, 250), [("box", (10, 10, 30, 30), RED), ("box", (60, 10, 110, 60), RED),
                                      ("box", (150, 10, 230, 90), RED)])))
    assert [r.value("大小") for r in m.regions] == ["小", "中", "大"]


def test_tiny_components_are_ignored_by_a_documented_minimum() -> None:
    # 200x200 = 40,000 pixels: the minimum is max(64, 40000 // 4000) = 64 pixels
    m = measure(png(draw((200, 200), [("box", (10, 10, 17, 17), RED), ("box", (40, 10, 48, 18), RED)])))
    assert [(r.bbox, r.area) for r in m.regions] == [((40, 10, 8, 8), 64)]
    # 2000x1000: the minimum is 2,000,000 // 4000 = 500 pixels, so a 20x20 box is a speck
    m = measure(png(draw((2000, 1000), [("box", (10, 10, 30, 30), RED), ("box", (100, 10, 123, 33), RED)])))
    assert [r.area for r in m.regions] == [529]


def test_a_plain_image_has_no_regions() -> None:
    for image in (Image.new("RGB", (64, 48), (255, 255, 255)), Image.new("RGB", (1, 1), (0, 0, 0)),
                  Image.new("RGBA", (30, 30), (0, 0, 0, 0))):
        assert measure(png(image)).regions == ()


def test_a_low_contrast_shape_is_background_as_documented() -> None:
    # light grey #c8c8c8 on white is ΔE 19 < 20: background; #b4b4b4 (ΔE 26) is found
    m = measure(png(draw((200, 100), [("box", (10, 10, 60, 60), (200, 200, 200)),
                                      ("box", (100, 10, 150, 60), (180, 180, 180))])))
    assert [r.bbox for r in m.regions] == [(100, 10, 50, 50)]


def test_dark_backgrounds_work_like_light_ones() -> None:
    m = measure(png(draw(CANVAS, BASIC, background=(20, 20, 20), scale=4)))
    assert m.background == (20, 20, 20)
    assert summary(m) == summary(measure(png(draw(CANVAS, BASIC))))


# ------------------------------------------------------------------ transparency


def test_transparent_background_makes_every_opaque_pixel_foreground() -> None:
    image = draw(CANVAS, BASIC, background=(0, 0, 0, 0), scale=4, mode="RGBA")
    m = measure(png(image))
    assert m.background is None
    assert summary(m) == summary(measure(png(draw(CANVAS, BASIC))))
    # anti-aliased edges are half transparent, not blended with a colour: the mean stays pure
    assert m.regions[0].mean_rgb == RED


def test_transparent_pixels_are_background_whatever_their_colour() -> None:
    pixels = np.zeros((100, 100, 4), dtype=np.uint8)
    pixels[..., :3] = (0, 0, 255)  # blue, but fully transparent
    pixels[20:40, 20:40] = (255, 0, 0, 255)
    pixels[60:90, 60:90] = (0, 160, 0, 100)  # alpha below 128: transparent too
    m = measure(png(Image.fromarray(pixels, "RGBA")))
    assert [(r.bbox, r.value("颜色")) for r in m.regions] == [((20, 20, 20, 20), "红色")]


def test_an_opaque_border_with_a_transparent_middle_uses_the_border_colour() -> None:
    pixels = np.zeros((100, 100, 4), dtype=np.uint8)
    pixels[...] = (255, 255, 255, 255)
    pixels[10:90, 10:90, 3] = 0  # a transparent hole, then a red box inside it
    pixels[30:50, 30:50] = (255, 0, 0, 255)
    m = measure(png(Image.fromarray(pixels, "RGBA")))
    assert m.background == (252, 252, 252)
    assert [r.bbox for r in m.regions] == [(30, 30, 20, 20)]


def test_palette_grey_and_sixteen_bit_pngs_measure_the_same_pixels() -> None:
    image = draw((200, 100), [("box", (20, 20, 60, 60), (0, 0, 0)), ("circle", (100, 20, 160, 80), (0, 0, 0))])
    reference = measure(png(image))
    assert summary(reference) == [("r1", "黑色", "正方形", "大"), ("r2", "黑色", "圆形", "大")]
    assert measure(png(image.convert("P"))) == reference
    assert measure(png(image.convert("L"))) == reference
    assert measure(png(image.convert("1"))) == reference
    sixteen = Image.fromarray(np.asarray(image.convert("L")).astype(np.uint16) * 257)
    assert sixteen.mode == "I;16"
    assert summary(measure(png(sixteen))) == summary(reference)


# ------------------------------------------------------------------ photo-like


def test_shapes_are_found_in_a_noisy_gradient_and_specks_are_ignored() -> None:
    rng = np.random.default_rng(20260501)
    height, width = 480, 640
    clean = np.asarray(draw((width, height), [
        ("circle", (60, 60, 180, 180), (220, 40, 40)),
        ("box", (260, 70, 380, 190), (40, 70, 200)),
        ("triangle", (440, 60, 580, 190), (30, 150, 50)),
        ("box", (80, 300, 400, 420), (250, 170, 20)),
    ], scale=4)).astype(np.float64)
    gradient = np.linspace(0, -25, width)[None, :, None] + np.linspace(0, -10, height)[:, None, None]
    background = np.all(clean == 255, axis=2)[..., None]
    noisy = clean + np.where(background, gradient, 0) + rng.normal(0, 6, clean.shape)
    for _ in range(400):  # dark specks of 1-4 pixels
        y, x = rng.integers(0, height - 2), rng.integers(0, width - 2)
        noisy[y:y + rng.integers(1, 3), x:x + rng.integers(1, 3)] = 40
    image = Image.fromarray(np.clip(noisy, 0, 255).round().astype(np.uint8), "RGB")
    m = measure(png(image))
    assert summary(m) == [("r1", "红色", "圆形", "中"), ("r2", "蓝色", "正方形", "中"),
                          ("r3", "绿色", "三角形", "中"), ("r4", "橙色", "长方形", "大")]
    square = m.regions[1].bbox  # noise moves an edge by a pixel or two
    assert all(abs(a - b) <= 2 for a, b in zip(square, (260, 70, 120, 120), strict=True)), square


# ------------------------------------------------------------------ reading order


def test_regions_are_numbered_in_reading_order_by_rows() -> None:
    shapes: list[Shape] = [  # drawn out of order; the top row's top edges are 30, 22 and 38
        ("box", (300, 38, 360, 98), GREEN),
        ("circle", (20, 30, 80, 90), RED),
        ("triangle", (160, 22, 230, 92), YELLOW),
        ("box", (200, 200, 240, 240), BLUE),   # second row, top 200
        ("circle", (20, 206, 60, 246), GREEN),  # second row, top 206
    ]
    m = measure(png(draw((400, 300), shapes, scale=4)))
    assert [(r.name, r.value("颜色"), r.value("形状")) for r in m.regions] == [
        ("r1", "红色", "圆形"), ("r2", "黄色", "三角形"), ("r3", "绿色", "正方形"),
        ("r4", "绿色", "圆形"), ("r5", "蓝色", "正方形")]


def test_a_row_holds_boxes_whose_tops_differ_by_less_than_half_the_smaller_height() -> None:
    # (x, y, w, h): tops 0 and 9 with heights 20 and 40 share a row (9 < 10); 10 does not
    assert reading_order([(50, 0, 10, 20), (0, 9, 10, 40)]) == [1, 0]
    assert reading_order([(50, 0, 10, 20), (0, 10, 10, 40)]) == [0, 1]
    # the row is anchored on its first box: 0 -> 8 joins, 16 is too far from 0 (16 >= 10)
    assert reading_order([(90, 0, 10, 20), (60, 8, 10, 20), (0, 16, 10, 20)]) == [1, 0, 2]
    assert reading_order([]) == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(9, 36), st.integers(9, 36),
                          st.sampled_from([RED, BLUE, GREEN, (0, 0, 0), (128, 0, 128)])),
                min_size=1, max_size=6, unique_by=lambda t: (t[0], t[1])))
def test_crisp_boxes_measure_exactly_and_number_in_reading_order(
        cells: list[tuple[int, int, int, int, tuple[int, int, int]]]) -> None:
    # one box per 40x40 grid cell (no two touch); x, y jitter inside the cell
    boxes = [(col * 40 + 2 + (w % 3), row * 40 + 2 + (h % 3), w, h) for col, row, w, h, _ in cells]
    image = draw((240, 160), [("box", (x, y, x + w, y + h), c) for (x, y, w, h), (*_, c) in zip(boxes, cells,
                                                                                               strict=True)])
    m = measure(png(image))
    assert [(r.bbox, r.area) for r in m.regions] == [(boxes[i], boxes[i][2] * boxes[i][3])
                                                     for i in reading_order(boxes)]
    assert all(r.shape in ("square", "rectangle") for r in m.regions)


# ------------------------------------------------------------------ identity of pixels


def test_a_byte_different_pixel_identical_png_measures_the_same() -> None:
    image = draw(CANVAS, BASIC, scale=4)
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "重新导出 🎉 𠮷")
    variants = [png(image, compress_level=0), png(image, compress_level=9), png(image, pnginfo=info),
                png(image.convert("RGBA"))]
    assert len(set(variants)) == len(variants)
    first = measure(variants[0])
    assert all(measure(data) == first for data in variants[1:])
    assert measure(variants[0]) == first  # and measuring twice gives the same result


def test_a_red_circle_resaved_blue_measures_blue_with_everything_else_unchanged() -> None:
    before = measure(png(draw(CANVAS, BASIC, scale=4)))
    after = measure(png(draw(CANVAS, [("circle", (20, 20, 80, 80), BLUE), *BASIC[1:]], scale=4)))
    assert (before.regions[0].value("颜色"), after.regions[0].value("颜色")) == ("红色", "蓝色")
    assert [a for a in attribute_lines(after.regions[0]) if not a.startswith("颜色")] == [
        a for a in attribute_lines(before.regions[0]) if not a.startswith("颜色")]
    assert after.regions[1:] == before.regions[1:]


# ------------------------------------------------------------------ names and values


def test_english_names_for_fields_and_values() -> None:
    m = measure(png(draw(CANVAS, BASIC)), "en")
    assert attribute_lines(m.regions[1]) == ("position：120,20,60,60", "area：3600", "color：blue",
                                             "shape：square", "size：small")
    assert [r.attributes[2:] for r in m.regions][0] == (("color", "red"), ("shape", "circle"), ("size", "small"))
    assert [r.value("shape") for r in m.regions] == ["circle", "square", "rectangle", "triangle"]
    assert m.in_language("zh") == measure(png(draw(CANVAS, BASIC)))
    assert attribute_lines(m.regions[1], ": ")[2] == "color: blue"
    with pytest.raises(ValueError, match="image_language"):
        measure(png(draw((10, 10), [])), "fr")


def test_only_the_five_measured_fields_have_values() -> None:
    region = measure(png(draw(CANVAS, BASIC))).regions[0]
    assert measured_fields() == ("位置", "面积", "颜色", "形状", "大小")
    assert measured_fields("en") == ("position", "area", "color", "shape", "size")
    assert [region.value(f) for f in measured_fields()] == [v for _, v in region.attributes]
    assert region.value("材质") is None and region.value("重量") is None and region.value("color") is None
    assert {"红色", "小", "圆形", "正方形", "大", "灰色"} <= set(measured_words())
    assert {"red", "small", "circle", "gray"} <= set(measured_words("en"))
    assert len(set(measured_words())) == len(measured_words())


def test_attribute_values_have_the_documented_formats() -> None:
    for region in measure(png(draw(CANVAS, BASIC, scale=4))).regions:
        values = dict(region.attributes)
        assert re.fullmatch(r"\d+,\d+,\d+,\d+", values["位置"])
        assert re.fullmatch(r"[1-9]\d*", values["面积"]) and int(values["面积"]) == region.area
        assert all(line.count("：") == 1 for line in attribute_lines(region))


def test_regions_are_looked_up_by_their_cited_name() -> None:
    m = measure(png(draw(CANVAS, BASIC)))
    assert m.region("r1") is m.regions[0] and m.region("r4") is m.regions[3]
    assert [m.region(name) for name in ("r0", "r5", "r01", "R1", "r", "1", "r-1", "r１")] == [None] * 8


# ------------------------------------------------------------------ serialisation


def test_a_measurement_round_trips_through_json() -> None:
    m = measure(png(draw(CANVAS, BASIC, scale=4)))
    data = json.loads(json.dumps(m.to_dict()))
    assert data["version"] == MEASUREMENT_VERSION and data["regions"][0]["color"] == "red"
    assert Measurement.from_dict(data) == m
    assert Measurement.from_dict(data, "en") == m.in_language("en")
    transparent = measure(png(draw((100, 100), [("box", (10, 10, 50, 50), RED)], background=(0, 0, 0, 0),
                                   mode="RGBA")))
    assert Measurement.from_dict(json.loads(json.dumps(transparent.to_dict()))) == transparent


def test_a_cached_measurement_of_another_version_or_shape_is_refused() -> None:
    data = measure(png(draw(CANVAS, BASIC))).to_dict()
    with pytest.raises(ValueError, match="version"):
        Measurement.from_dict({**data, "version": MEASUREMENT_VERSION + 1})
    bad_regions = [
        [{**data["regions"][0], "color": "mauve"}],
        [{**data["regions"][0], "area": True}],
        [{**data["regions"][0], "bbox": [1, 2, 3]}],
        [{k: v for k, v in data["regions"][0].items() if k != "shape"}],
        [data["regions"][1]],  # numbered 2 without a 1
    ]
    for regions in bad_regions:
        with pytest.raises(ValueError):
            Measurement.from_dict({**data, "regions": regions})
    with pytest.raises(ValueError):
        Measurement.from_dict({"version": MEASUREMENT_VERSION})


# ------------------------------------------------------------------ unreadable images


def _garbage_idat(data: bytes) -> bytes:
    """The image data replaced by bytes that are not a zlib stream (same length and CRC)."""
    at = data.index(b"IDAT") + 4
    length = int.from_bytes(data[at - 8:at - 4], "big")
    return data[:at] + b"\xff" * length + data[at + length:]


@pytest.mark.parametrize("make, why", [
    (lambda ok: b"", "not a PNG"),
    (lambda ok: "活动时间：周四16:30\n".encode(), "not a PNG"),
    (lambda ok: png_as_jpeg(), "not a PNG"),
    (lambda ok: ok[:len(ok) // 2], "does not decode"),
    (lambda ok: ok[:40], "header is damaged or the file is cut short"),
    (lambda ok: _garbage_idat(ok), "does not decode"),
    (lambda ok: ok[:33] + zlib.compress(b"x") + ok[33:], "header is damaged"),
])
def test_bytes_that_are_not_a_decodable_png_are_unreadable_evidence(make: Callable[[bytes], bytes],
                                                                    why: str) -> None:
    ok = png(draw((120, 80), BASIC[:1]))
    with pytest.raises(ImageError, match=why) as caught:
        measure(make(ok))
    assert isinstance(caught.value, EvidenceError)
    assert (caught.value.name, caught.value.line) == ("unreadable-evidence", 1)
    assert caught.value.hint


def png_as_jpeg() -> bytes:
    out = io.BytesIO()
    draw((50, 50), BASIC[:1]).save(out, format="JPEG")
    return out.getvalue()


def test_an_image_over_the_pixel_limit_is_unreadable_before_it_is_decoded() -> None:
    data = png(Image.new("1", (3000, 2000)))
    with pytest.raises(ImageError, match="3000x2000 pixels is more than the 5,999,999"):
        measure(data, max_pixels=5_999_999)
    assert measure(data, max_pixels=6_000_000).regions == ()


def test_an_animated_png_measures_its_first_frame() -> None:
    frames = [draw((100, 100), [("box", (10, 10, 60, 60), colour)]) for colour in (RED, BLUE)]
    out = io.BytesIO()
    frames[0].save(out, format="PNG", save_all=True, append_images=frames[1:], duration=100)
    assert [r.value("颜色") for r in measure(out.getvalue()).regions] == ["红色"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_pngs_measure_or_are_unreadable_never_crash(data: st.DataObject) -> None:
    good = png(draw((60, 40), [("circle", (5, 5, 35, 35), RED)]))
    mutated = bytearray(good)
    for _ in range(data.draw(st.integers(1, 8))):
        mutated[data.draw(st.integers(0, len(good) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(8, len(good)))
    try:
        result = measure(bytes(mutated[:cut]))
    except ImageError as exc:
        assert exc.name == "unreadable-evidence"
    else:
        assert all(r.area > 0 for r in result.regions)


# ------------------------------------------------------------------ crops for the hover


def test_a_region_crops_to_a_png_of_its_box_plus_padding() -> None:
    data = png(draw(CANVAS, BASIC, scale=4))
    m = measure(data)
    crop = crop_png(data, m.regions[1])
    with Image.open(io.BytesIO(crop)) as image:
        assert (image.format, image.size) == ("PNG", (60 + 8, 60 + 8))
    again = measure(crop)
    assert [(r.bbox, r.value("颜色"), r.value("形状")) for r in again.regions] == [((4, 4, 60, 60), "蓝色", "正方形")]
    assert crop_png(data, m.regions[1]) == crop  # deterministic bytes for the same input


def test_a_crop_is_clipped_at_the_image_edge_and_scaled_down_when_large() -> None:
    data = png(draw((600, 300), [("box", (0, 0, 50, 50), RED), ("box", (100, 20, 580, 260), BLUE)]))
    corner, big = measure(data).regions
    with Image.open(io.BytesIO(crop_png(data, corner))) as image:
        assert image.size == (54, 54)
    with Image.open(io.BytesIO(crop_png(data, big, max_side=128))) as image:
        assert max(image.size) == 128 and image.size == (128, 65)


# ------------------------------------------------------------------ sidecar metadata


def test_a_sidecar_holds_the_front_matter_keys_as_a_plain_mapping() -> None:
    text = ("doc_id: panel-𠮷\r\nsubject: 设备面板 🎉\r\ntitle: 007\r\nversion: '3'\r\nstatus: active\r\n"
            "effective_from: 2026-01-01\r\neffective_until: 2026-12-31\r\nnote: 其他键被忽略\r\n")
    front = parse_sidecar(("\ufeff" + text).encode("utf-8"))
    assert (front.doc_id, front.subject, front.title, front.version, front.status) == (
        "panel-𠮷", "设备面板 🎉", "007", 3, "active")
    assert (str(front.effective_from), str(front.effective_until), front.end_line) == ("2026-01-01", "2026-12-31", 0)
    assert parse_sidecar(b"---\ndoc_id: a\n") == parse_sidecar(b"doc_id: a\n")
    assert parse_sidecar(b"") == parse_sidecar(b"# only a comment\n")
    assert parse_sidecar(b"").doc_id is None


@pytest.mark.parametrize("text, line, message", [
    ("doc_id: a\ndoc_id: b\n", 2, "repeated"),
    ("title: 面板\nversion: 01\n", 2, "positive integer"),
    ("status: 作废\n", 1, "neither 'active' nor 'revoked'"),
    ("subject: x\n\neffective_until: 2026-13-01\n", 3, "ISO date"),
    ("doc_id: 设备 面板\n", 1, "whitespace"),
    ("doc_id: a\nsubject:\n", 2, "empty or null"),
    ("doc_id: [a, b]\n", 1, "single value"),
    ("- doc_id: a\n", 1, "mapping"),
    ("doc_id: a\ntitle: 'x\n", 2, "not valid YAML"),
    ("doc_id: a\n---\ndoc_id: b\n", 2, "more than one YAML document"),
    ("---\r\ndoc_id: a\r\ndoc_id: b\r\n", 3, "repeated"),
])
def test_a_bad_sidecar_is_invalid_front_matter_on_its_own_line(text: str, line: int, message: str) -> None:
    with pytest.raises(EvidenceError, match=message) as caught:
        parse_sidecar(text.encode("utf-8"))
    assert (caught.value.name, caught.value.line) == ("invalid-front-matter", line)


def test_a_sidecar_that_is_not_utf8_is_invalid_front_matter() -> None:
    with pytest.raises(EvidenceError, match="UTF-8") as caught:
        parse_sidecar("doc_id: a\ntitle: 面板\n".encode("gbk"))
    assert (caught.value.name, caught.value.line) == ("invalid-front-matter", 2)


def test_doc_id_and_subject_of_an_image() -> None:
    empty = parse_sidecar(b"")
    assert sidecar_path("images/shapes.png") == "images/shapes.png.yaml"
    assert image_doc_id("images/shapes.png", empty) == "images/shapes"
    assert image_doc_id("images/shapes.png", parse_sidecar(b"doc_id: shapes\n")) == "shapes"
    assert image_subject("images/shapes", empty) == "images/shapes"
    assert image_subject("shapes", parse_sidecar("subject: 设备面板\n".encode())) == "设备面板"
    with pytest.raises(EvidenceError, match="whitespace") as caught:
        image_doc_id("截图/设备 面板.png", empty)
    assert caught.value.name == "invalid-front-matter"
    assert "'设备 面板.png.yaml'" in caught.value.hint


# ------------------------------------------------------------------ the example image


def test_the_example_image_is_what_its_script_draws_and_measures_as_documented() -> None:
    script = REPO / "examples" / "scripts" / "make_shapes.py"
    proc = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    folder = EXAMPLE_EVIDENCE / "images"
    front = parse_sidecar((folder / "shapes.png.yaml").read_bytes())
    assert (front.doc_id, front.subject, front.version) == ("shapes", "设备面板", 1)
    m = measure((folder / "shapes.png").read_bytes())
    assert [attribute_lines(r) for r in m.regions] == [
        ("位置：48,48,48,48", "面积：1844", "颜色：红色", "形状：圆形", "大小：小"),
        ("位置：136,50,48,48", "面积：1844", "颜色：绿色", "形状：圆形", "大小：小"),
        ("位置：390,40,140,121", "面积：8630", "颜色：黄色", "形状：三角形", "大小：中"),
        ("位置：48,230,300,120", "面积：36000", "颜色：蓝色", "形状：长方形", "大小：大"),
        ("位置：440,236,90,90", "面积：8100", "颜色：黑色", "形状：正方形", "大小：中"),
    ]


def test_decoding_gives_rgba_of_the_images_size() -> None:
    image = decode_png(png(draw((30, 20), [])))
    assert (image.mode, image.size) == ("RGBA", (30, 20))


def test_region_values_are_frozen() -> None:
    region = Region(number=1, bbox=(0, 0, 2, 2), area=4, mean_rgb=(1, 2, 3), color="red", shape="square",
                    size="small")
    with pytest.raises(AttributeError):
        region.area = 5  # type: ignore[misc]  # the point: a frozen dataclass refuses it
    assert region.name == "r1" and region.attributes[0] == ("位置", "0,0,2,2")
