"""Image evidence: PNG bytes -> measured regions, and the ``NAME.png.yaml`` sidecar (SPEC §12, §15).

Pure: bytes in, values out; no file system access, no network. The one measurement function
is :func:`measure`; everything it does is written down here, because a claim about an image
is only as good as the rule that re-measures it at every check.

Decoding
    The bytes must start with the PNG signature and decode with Pillow (the first frame of an
    animated PNG; palettes, grey levels and 16-bit channels converted by Pillow to 8-bit RGB,
    or RGBA when the PNG has an alpha channel or a transparent colour). Anything else, and
    images of more than :data:`MAX_PIXELS` pixels (checked from the header, before any pixel
    is decoded), raise :class:`ImageError` (``unreadable-evidence``). 16-bit grey levels ``v``
    become ``round(v * 255 / 65535)`` (Pillow would clip them to 255).

Foreground (what is not background)
    A pixel whose alpha is below :data:`OPAQUE_ALPHA` (128) is always background. When at
    least half of the border pixels (the one-pixel frame) are transparent, the background is
    transparency and every opaque pixel is foreground. Otherwise the background colour is the
    *dominant colour of the opaque border pixels*: the most frequent cell when each channel is
    quantised to 5 bits (32 levels, the cell's centre standing for it; ties go to the lower
    cell number). A pixel is foreground when its CIELAB distance (CIE76, ΔE*ab) to that colour
    is more than :data:`FOREGROUND_DELTA_E` (20), both taken at 5-bit precision. ΔE 20 keeps
    a light gradient with camera noise in the background and finds pure colours, black and
    mid greys on white (light grey ``#c8c8c8`` on white, ΔE about 19, is background). PNG
    alpha is straight, not premultiplied: the colour of a half-transparent edge pixel is its
    stored RGB.

Regions
    Connected components of the foreground (8-connectivity, ``skimage.measure.label``),
    measured with ``skimage.measure.regionprops``. Components with fewer than
    ``max(MIN_REGION_AREA, width * height // MIN_REGION_FRACTION)`` pixels (64 pixels, or one
    4000th of the image: 1000 pixels in a 4-megapixel photo) are ignored as specks. An image
    whose kept regions' bounding boxes hold more than :data:`MAX_BOX_PIXELS` pixels in all
    (thousands of interleaved stripes) raises :class:`ImageError`: measuring costs what the
    boxes hold, and this keeps every measurement to seconds.
    Regions are numbered ``r1, r2, …`` in reading order of their bounding boxes: sorted by
    top edge, then left edge; a box whose top edge is less than half the smaller of the two
    heights below the top edge of the first box of the current row joins that row; rows are
    read top to bottom, each left to right.

Attributes (fields of a region, in this order; ``image_language`` "zh" or "en")
    ``位置``/``position``: the bounding box ``x,y,w,h`` in pixels, origin top-left, no spaces.
    ``面积``/``area``: the number of foreground pixels of the region (holes excluded), a bare
    integer.
    ``颜色``/``color``: the palette name (:data:`PALETTE`) nearest by CIE76 distance to the
    mean colour of the region's interior (the region less its one-pixel edge, where
    anti-aliasing blends with the background: pixels whose four neighbours are all in the
    region; the whole region when nothing is left).
    ``形状``/``shape``: from ratios that survive anti-aliasing, tried in this order (see
    :func:`classify_shape`): an extent (area / bounding box area) of at least 0.90 is a box,
    ``正方形``/``square`` when the longer side is at most 1.10 times the shorter, else
    ``长方形``/``rectangle`` (boxes are axis-aligned, as in screenshots: a square rotated 45°
    is ``其他``); ``圆形``/``circle`` when the circularity 4πA/P² (P: ``perimeter_crofton``,
    holes included) is at least 0.95, the moment axes' ratio at most 1.10 and the extent
    within 0.70..0.85 (π/4 for a disc); a solidity (pixel area / area of the convex hull of
    the outline, the midpoints of the region's pixel edges that face outside, pieces touching
    only at a corner included) below 0.85 is ``其他``/``other`` (stars, rings, arrows);
    ``三角形``/``triangle`` when the extent is at most 0.65 and the area at most 1.35 times
    the largest triangle with corners on the region's outline (any rotation; a rotated
    square or rectangle is about 2.0); anything else is ``其他``/``other``.
    ``大小``/``size``: relative to the image: ``小``/``small`` below 1 % of its pixels,
    ``中``/``medium`` from 1 % to below 5 %, ``大``/``large`` from 5 %.

Nothing else is measured: material, weight, purpose or safety are never attributes.

Measurements depend on pixels only (a byte-different, pixel-identical re-encode measures the
same). They serialise to JSON-able dicts (:meth:`Measurement.to_dict`) so the index can cache
them by sha256; :data:`MEASUREMENT_VERSION` changes whenever a threshold or rule here
changes, which invalidates cached results. Heavy libraries (numpy, Pillow, scikit-image) are
imported on first use, so a workspace without PNGs never loads them.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import math
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .evidence import (
    DOC_ID_FORBIDDEN,
    EvidenceDocument,
    EvidenceError,
    FrontMatter,
    default_doc_id,
    parse_front_matter,
)
from .model import FieldLine
from .text import split_lines, strip_bom

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from PIL import Image

MEASUREMENT_VERSION = 1
"""Bump on any change of a rule or threshold below: cached measurements of another version
are measured again (:meth:`Measurement.from_dict` refuses them)."""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_PIXELS = 25_000_000
"""Larger images are ``unreadable-evidence`` (a decompression bomb must not exhaust memory)."""
MAX_BOX_PIXELS = 4 * MAX_PIXELS
"""Larger sums of the regions' bounding-box areas are ``unreadable-evidence``: measuring a region
costs what its box holds, so this bounds a measurement's time (a few seconds) whatever the pixels."""
OPAQUE_ALPHA = 128
"""Pixels with alpha below this are transparent, hence background."""
FOREGROUND_DELTA_E = 20.0
"""CIE76 distance from the background colour above which a pixel is foreground."""
QUANT_BITS = 5
"""Bits per channel kept when finding the background and comparing colours with it."""
MIN_REGION_AREA = 64
MIN_REGION_FRACTION = 4000
"""A region needs ``max(MIN_REGION_AREA, width * height // MIN_REGION_FRACTION)`` pixels."""
SMALL_BELOW = 0.01
LARGE_FROM = 0.05
"""Size thresholds, as fractions of the image's pixels: small < 1 % <= medium < 5 % <= large."""
SOLIDITY_MIN = 0.85
BOX_EXTENT_MIN = 0.90
SQUARE_SIDE_RATIO_MAX = 1.10
CIRCLE_CIRCULARITY_MIN = 0.95
CIRCLE_AXIS_RATIO_MAX = 1.10
CIRCLE_EXTENT_RANGE = (0.70, 0.85)
TRIANGLE_EXTENT_MAX = 0.65
TRIANGLE_AREA_RATIO_MAX = 1.35

LANGUAGES = ("zh", "en")
FIELDS: Mapping[str, tuple[str, str, str, str, str]] = {
    "zh": ("位置", "面积", "颜色", "形状", "大小"),
    "en": ("position", "area", "color", "shape", "size"),
}
"""The five measured fields, in attribute order, per ``image_language`` (SPEC §15)."""

SHAPES: Mapping[str, str] = {"circle": "圆形", "square": "正方形", "rectangle": "长方形",
                             "triangle": "三角形", "other": "其他"}
SIZES: Mapping[str, str] = {"small": "小", "medium": "中", "large": "大"}
COLORS: Mapping[str, str] = {
    "red": "红色", "orange": "橙色", "yellow": "黄色", "green": "绿色", "cyan": "青色",
    "blue": "蓝色", "purple": "紫色", "pink": "粉色", "brown": "棕色", "black": "黑色",
    "white": "白色", "gray": "灰色",
}
"""English key -> Chinese name. The English value of an attribute is its key."""

PALETTE: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("red", (255, 0, 0)), ("red", (200, 16, 32)), ("red", (139, 0, 0)),
    ("orange", (255, 140, 0)), ("orange", (255, 165, 0)),
    ("yellow", (255, 255, 0)), ("yellow", (255, 215, 0)),
    ("green", (0, 255, 0)), ("green", (0, 160, 0)), ("green", (0, 100, 0)),
    ("cyan", (0, 255, 255)), ("cyan", (0, 180, 190)), ("cyan", (0, 128, 128)),
    ("blue", (0, 0, 255)), ("blue", (0, 0, 139)), ("blue", (30, 144, 255)),
    ("blue", (65, 105, 225)), ("blue", (70, 130, 180)),
    ("purple", (128, 0, 128)), ("purple", (148, 0, 211)), ("purple", (255, 0, 255)),
    ("purple", (75, 0, 130)), ("purple", (238, 130, 238)),
    ("pink", (255, 192, 203)), ("pink", (255, 105, 180)),
    ("brown", (139, 69, 19)), ("brown", (160, 82, 45)),
    ("black", (0, 0, 0)), ("white", (255, 255, 255)),
    ("gray", (128, 128, 128)), ("gray", (190, 190, 190)), ("gray", (96, 96, 96)),
)
"""Reference sRGB colours; a colour takes the name of the nearest one by CIE76 distance
(D65 white). Several references per name cover light and dark shades (navy is blue, maroon
red). ``(255, 0, 0)`` is red."""


_REGION_NAME = re.compile(r"r[1-9][0-9]{0,8}", re.ASCII)


class ImageError(EvidenceError):
    """A PNG that cannot be measured: always ``unreadable-evidence`` (SPEC §12), line 1."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__("unreadable-evidence", message, line=1, hint=hint)


# ----------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class Region:
    """One measured region (SPEC §12).

    ``number`` is 1-based (``r1`` is number 1); ``bbox`` is ``(x, y, w, h)`` in pixels, origin
    top-left; ``area`` counts pixels; ``mean_rgb`` is the interior's mean sRGB colour, each
    channel rounded to an integer 0..255; ``color``/``shape``/``size`` are the English keys
    (:data:`COLORS`, :data:`SHAPES`, :data:`SIZES`); ``attributes`` are the five
    ``(field, value)`` pairs in :data:`FIELDS` order, named in ``language``.
    """

    number: int
    bbox: tuple[int, int, int, int]
    area: int
    mean_rgb: tuple[int, int, int]
    color: str
    shape: str
    size: str
    language: str = "zh"
    attributes: tuple[tuple[str, str], ...] = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", _attributes(self, self.language))

    @property
    def name(self) -> str:
        """``r1``, ``r2``, … as cited after ``#``."""
        return f"r{self.number}"

    def value(self, field: str) -> str | None:
        """The measured value of ``field`` (a name in this region's language), or None when
        ``field`` is not one of the five measured fields (SPEC §12: GR117).
        """
        for name, value in self.attributes:
            if name == field:
                return value
        return None

    def in_language(self, language: str) -> Region:
        return dataclasses.replace(self, language=_check_language(language))


def _attributes(region: Region, language: str) -> tuple[tuple[str, str], ...]:
    names = FIELDS[_check_language(language)]
    x, y, w, h = region.bbox
    if language == "zh":
        words = (COLORS[region.color], SHAPES[region.shape], SIZES[region.size])
    else:
        words = (region.color, region.shape, region.size)
    values = (f"{x},{y},{w},{h}", str(region.area), *words)
    return tuple(zip(names, values, strict=True))


def _check_language(language: str) -> str:
    if language not in LANGUAGES:
        raise ValueError(f"image_language must be one of {', '.join(LANGUAGES)}, not {language!r}")
    return language


@dataclass(frozen=True, slots=True)
class Measurement:
    """The regions of one image. ``width``/``height`` in pixels; ``background`` the dominant
    border colour (sRGB, 5-bit cell centre) or None for a transparent background.
    """

    width: int
    height: int
    background: tuple[int, int, int] | None
    regions: tuple[Region, ...]
    language: str = "zh"
    version: int = MEASUREMENT_VERSION

    def region(self, name: str) -> Region | None:
        """The region cited as ``name`` (``"r2"``), or None when there is no such region."""
        if _REGION_NAME.fullmatch(name) is None:
            return None
        number = int(name[1:])
        return self.regions[number - 1] if number <= len(self.regions) else None

    def in_language(self, language: str) -> Measurement:
        """The same measurement with attribute names in ``language`` ("zh" or "en")."""
        language = _check_language(language)
        return dataclasses.replace(
            self, language=language, regions=tuple(r.in_language(language) for r in self.regions))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict, language-neutral (English keys); :meth:`from_dict` reverses it."""
        return {
            "version": self.version,
            "width": self.width,
            "height": self.height,
            "background": list(self.background) if self.background is not None else None,
            "regions": [
                {"number": r.number, "bbox": list(r.bbox), "area": r.area,
                 "mean_rgb": list(r.mean_rgb), "color": r.color, "shape": r.shape, "size": r.size}
                for r in self.regions
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], language: str = "zh") -> Measurement:
        """Rebuild a measurement from :meth:`to_dict` output.

        Raises ``ValueError`` when the dict was made by another :data:`MEASUREMENT_VERSION`
        (the caller measures again) or is not of the documented shape.
        """
        language = _check_language(language)
        if data.get("version") != MEASUREMENT_VERSION:
            raise ValueError(f"measurement version {data.get('version')!r} is not {MEASUREMENT_VERSION}")
        try:
            background = data["background"]
            regions = tuple(
                Region(number=_int(r["number"]), bbox=_ints(r["bbox"], 4), area=_int(r["area"]),
                       mean_rgb=_ints(r["mean_rgb"], 3), color=_key(r["color"], COLORS),
                       shape=_key(r["shape"], SHAPES), size=_key(r["size"], SIZES), language=language)
                for r in data["regions"]
            )
            measurement = cls(
                width=_int(data["width"]), height=_int(data["height"]),
                background=None if background is None else _ints(background, 3),
                regions=regions, language=language,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a measurement dict: {exc!r}") from None
        if [r.number for r in regions] != list(range(1, len(regions) + 1)):
            raise ValueError("region numbers are not 1, 2, … in order")
        return measurement


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _ints(value: Any, n: int) -> Any:
    if not isinstance(value, list | tuple) or len(value) != n:
        raise TypeError(f"{value!r} is not {n} integers")
    return tuple(_int(v) for v in value)


def _key(value: Any, names: Mapping[str, str]) -> str:
    if value not in names:
        raise TypeError(f"{value!r} is not one of {', '.join(names)}")
    return str(value)


def measured_fields(language: str = "zh") -> tuple[str, ...]:
    """The five field names an image claim may quote (SPEC §12); any other is GR117."""
    return FIELDS[_check_language(language)]


def measured_words(language: str = "zh") -> tuple[str, ...]:
    """Every colour, shape and size name in ``language``: the measured values the closed
    question grammar matches (SPEC §13), besides the field names.
    """
    if _check_language(language) == "zh":
        return (*dict.fromkeys(COLORS.values()), *SHAPES.values(), *SIZES.values())
    return (*COLORS, *SHAPES, *SIZES)


ATTRIBUTES_PER_REGION = 5


def attribute_line_number(region: int, field_index: int) -> int:
    """The 1-based line number of one attribute of an image version: region ``r1``'s five
    attributes (in :data:`FIELDS` order, ``field_index`` 0..4) are lines 1-5, ``r2``'s 6-10, ….

    An image has no text lines; this number is the identity of a region attribute wherever
    an evidence line is counted (SPEC §15: ``same_key_sources_checked``, coverage's D), so
    ``(doc_id, version, line)`` stands for ``(doc_id, version, region, field)``.
    """
    if region < 1 or not 0 <= field_index < ATTRIBUTES_PER_REGION:
        raise ValueError(f"no attribute {field_index} of region {region}")
    return (region - 1) * ATTRIBUTES_PER_REGION + field_index + 1


def attribute_of_line(line: int) -> tuple[int, int]:
    """The inverse of :func:`attribute_line_number`: ``(region number, field index)``."""
    if line < 1:
        raise ValueError(f"line {line} is not an attribute line")
    return (line - 1) // ATTRIBUTES_PER_REGION + 1, (line - 1) % ATTRIBUTES_PER_REGION


def attribute_lines(region: Region, separator: str = "：") -> tuple[str, ...]:
    """The region's attributes as quotable lines ``FIELD：VALUE``, e.g. ``颜色：红色`` (SPEC §12)."""
    return tuple(f"{name}{separator}{value}" for name, value in region.attributes)


# ------------------------------------------------------------------------- decoding


def decode_png(data: bytes, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """PNG bytes -> a loaded Pillow image in mode ``RGBA`` (the first frame).

    Raises :class:`ImageError` (``unreadable-evidence``) for bytes without the PNG signature,
    undecodable or truncated data, and images of more than ``max_pixels`` pixels.
    """
    image = _decode(data, max_pixels)
    return image if image.mode == "RGBA" else image.convert("RGBA")


def _decode(data: bytes, max_pixels: int) -> Image.Image:
    """:func:`decode_png`, but ``RGB`` when the PNG has no alpha channel or transparent colour.

    The header is read with Pillow's ``PngImagePlugin.PngImageFile`` itself (not ``Image.open``,
    whose own decompression-bomb check would refuse a huge image before its size is known),
    so a 30000x30000 image is refused naming its size, before any pixel is decoded.
    """
    from PIL import PngImagePlugin

    hint = "Export the image again as PNG; nothing else in the index is affected."
    if not data.startswith(PNG_SIGNATURE):
        raise ImageError("image evidence not indexed: the file is not a PNG (no PNG signature)", hint)
    try:
        image = PngImagePlugin.PngImageFile(io.BytesIO(data))
    except Exception as exc:  # SyntaxError, OSError, struct.error, …: a damaged or cut header
        reason = f"{len(data)} bytes" if isinstance(exc, struct.error) or "unpack" in str(exc) else _reason(exc)
        raise ImageError("image evidence not indexed: the PNG's header is damaged or the file is cut short"
                         f" before its pixels ({reason})", hint) from None
    width, height = image.size
    if width * height > max_pixels:
        raise ImageError(
            f"image evidence not indexed: {width}x{height} pixels is more than the"
            f" {max_pixels:,} the measurement reads (a larger image is never decoded)",
            f"Scale the image down to at most {max_pixels:,} pixels (e.g. 5000x5000) and save it again.")
    try:
        image.load()
        if image.mode.startswith("I"):  # 16-bit grey: Pillow's convert() would clip it to 255
            return _grey16(image)
        mode = "RGBA" if image.has_transparency_data else "RGB"
        return image if image.mode == mode else image.convert(mode)
    except Exception as exc:  # Pillow's decoders raise OSError, SyntaxError, ValueError, zlib.error, …
        raise ImageError(f"image evidence not indexed: the PNG does not decode ({_reason(exc)})", hint) from None


def _reason(exc: BaseException) -> str:
    """The first line of a decoder's message, without object reprs (``<_io.BytesIO object at …>``)."""
    text = re.sub(r"\s*<[^<>]* object at 0x[0-9a-fA-F]+>", "", str(exc).splitlines()[0] if str(exc) else "")
    return text.strip() or type(exc).__name__


def _grey16(image: Image.Image) -> Image.Image:
    """A 16-bit grey PNG (Pillow mode ``I;16``/``I``) as 8-bit ``RGB``, or ``RGBA`` when it has a
    transparent grey level (``tRNS``): each level ``v`` (0..65535) becomes ``round(v * 255 /
    65535)``, as Pillow does for 16-bit RGB (whose ``convert`` would clip grey to 255 instead).
    """
    import numpy as np
    from PIL import Image

    levels = np.asarray(image).astype(np.int64)
    grey = ((np.clip(levels, 0, 65535) * 255 + 32767) // 65535).astype(np.uint8)
    channels = [grey, grey, grey]
    transparent = image.info.get("transparency")
    if isinstance(transparent, int):
        channels.append(np.where(levels == transparent, 0, 255).astype(np.uint8))
    return Image.fromarray(np.stack(channels, axis=-1), "RGBA" if len(channels) == 4 else "RGB")


# ---------------------------------------------------------------------- measurement


def measure(data: bytes, language: str = "zh", *, max_pixels: int = MAX_PIXELS) -> Measurement:
    """Measure the regions of one PNG (SPEC §12; the rules are in this module's docstring).

    ``data`` are the file's raw bytes; ``language`` names the attributes ("zh" or "en").
    Deterministic: the same pixels give the same measurement. Raises :class:`ImageError`
    (``unreadable-evidence``) when ``data`` is not a decodable PNG of at most ``max_pixels``
    pixels, ``ValueError`` for an unknown ``language``.
    """
    _check_language(language)
    return measure_pixels(_as_array(_decode(data, max_pixels)), language)


def _as_array(image: Image.Image) -> npt.NDArray[np.uint8]:
    import numpy as np

    return np.asarray(image, dtype=np.uint8)


def measure_pixels(rgba: npt.NDArray[np.uint8], language: str = "zh") -> Measurement:
    """:func:`measure` on a decoded ``(height, width, 4)`` uint8 RGBA array, or an RGB one
    ``(height, width, 3)`` (every pixel opaque).
    """
    import numpy as np
    from skimage.measure import label, regionprops

    height, width = rgba.shape[:2]
    mask, background = _foreground(rgba)
    total = width * height
    min_area = max(MIN_REGION_AREA, total // MIN_REGION_FRACTION)
    labels, count = label(mask, connectivity=2, return_num=True)
    if count > 64:  # many specks (noise): drop them before regionprops makes an object of each
        small = np.bincount(labels.ravel(), minlength=count + 1) < min_area
        small[0] = False
        labels[small[labels]] = 0
    _check_box_pixels(labels, min_area)
    found: list[tuple[tuple[int, int, int, int], int, tuple[int, int, int], str]] = []
    for props in regionprops(labels):
        area = int(props.area)
        if area < min_area:
            continue
        top, left, bottom, right = (int(v) for v in props.bbox)
        bbox = (left, top, right - left, bottom - top)
        found.append((bbox, area, _mean_colour(rgba, props), classify_shape(props)))
    regions = []
    for number, index in enumerate(reading_order([f[0] for f in found]), 1):
        bbox, area, mean_rgb, shape = found[index]
        regions.append(Region(
            number=number, bbox=bbox, area=area, mean_rgb=mean_rgb, color=nearest_color(mean_rgb),
            shape=shape, size=size_class(area, total), language=language,
        ))
    return Measurement(width=width, height=height, background=background, regions=tuple(regions),
                       language=language)


def _check_box_pixels(labels: npt.NDArray[np.int_], min_area: int) -> None:
    """Refuse an image whose regions' bounding boxes add up to more than
    :data:`MAX_BOX_PIXELS`: measuring a region costs what its box holds, so thousands of
    interleaved stripes or combs, each boxed by nearly the whole image, would take hours.

    Raises :class:`ImageError` (``unreadable-evidence``) naming the count and the total.
    """
    import numpy as np
    from scipy.ndimage import find_objects

    areas = np.bincount(labels.ravel())
    kept = np.flatnonzero(areas >= min_area)
    kept = kept[kept > 0]
    boxes = find_objects(labels)
    covered = 0
    for index in kept.tolist():
        rows, cols = boxes[index - 1]
        covered += (rows.stop - rows.start) * (cols.stop - cols.start)
    if covered > MAX_BOX_PIXELS:
        raise ImageError(
            f"image evidence not indexed: its {len(kept):,} regions' bounding boxes hold {covered:,} pixels"
            f" in all, more than the {MAX_BOX_PIXELS:,} the measurement reads (regions that interleave,"
            " like stripes or combs, each boxed by most of the image)",
            "Crop the image to the parts a claim cites, or split it into several images.")


def _foreground(rgba: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.bool_], tuple[int, int, int] | None]:
    """The foreground mask and the background colour (None: transparent), see the docstring."""
    import numpy as np

    border = np.concatenate([rgba[0], rgba[-1], rgba[1:-1, 0], rgba[1:-1, -1]])
    opaque = None
    if rgba.shape[2] == 4:
        opaque = rgba[..., 3] >= OPAQUE_ALPHA
        everything = len(border)
        border = border[border[:, 3] >= OPAQUE_ALPHA]
        if len(border) * 2 < everything:
            return opaque, None
    counts = np.bincount(_cells(border), minlength=1 << (3 * QUANT_BITS))
    cell = int(np.argmax(counts))
    lab = _cell_lab()
    distance = np.sqrt(((lab - lab[cell]) ** 2).sum(axis=1))
    far = distance > FOREGROUND_DELTA_E
    mask: npt.NDArray[np.bool_] = far[_cells(rgba)]
    if opaque is not None:
        mask &= opaque
    return mask, _cell_rgb(cell)


def _cells(pixels: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint16]:
    """The 5-bit colour cell number ``r << 10 | g << 5 | b`` of each pixel (last axis RGB[A])."""
    import numpy as np

    shift = 8 - QUANT_BITS
    cells: npt.NDArray[np.uint16] = pixels[..., 0].astype(np.uint16)
    cells >>= shift  # in place: three passes fewer than building r, g and b apart
    for channel in (1, 2):
        cells <<= QUANT_BITS
        cells |= pixels[..., channel] >> shift
    return cells


def _cell_rgb(cell: int) -> tuple[int, int, int]:
    """The sRGB centre of a 5-bit cell."""
    step = 1 << (8 - QUANT_BITS)
    mask = (1 << QUANT_BITS) - 1
    r, g, b = (((cell >> shift) & mask) * step + step // 2 for shift in (2 * QUANT_BITS, QUANT_BITS, 0))
    return (r, g, b)


@functools.cache
def _cell_lab() -> npt.NDArray[np.float64]:
    """CIELAB of the centre of every 5-bit cell, shape ``(32768, 3)``; computed once, read-only."""
    import numpy as np
    from skimage.color import rgb2lab

    step = 1 << (8 - QUANT_BITS)
    levels = np.arange(1 << QUANT_BITS) * step + step // 2
    r, g, b = np.meshgrid(levels, levels, levels, indexing="ij")
    rgb = np.stack([r.ravel(), g.ravel(), b.ravel()], axis=1)[None] / 255.0
    lab: npt.NDArray[np.float64] = rgb2lab(rgb)[0]
    lab.setflags(write=False)
    return lab


@functools.cache
def _palette_lab() -> npt.NDArray[np.float64]:
    import numpy as np
    from skimage.color import rgb2lab

    lab: npt.NDArray[np.float64] = rgb2lab(np.array([[rgb for _, rgb in PALETTE]], dtype=float) / 255.0)[0]
    lab.setflags(write=False)
    return lab


def nearest_color(rgb: Sequence[int]) -> str:
    """The English key of the :data:`PALETTE` name nearest to sRGB ``rgb`` (0..255) by CIE76."""
    import numpy as np
    from skimage.color import rgb2lab

    lab = rgb2lab(np.array([[rgb]], dtype=float) / 255.0)[0, 0]
    distance = ((_palette_lab() - lab) ** 2).sum(axis=1)
    return PALETTE[int(np.argmin(distance))][0]


def _mean_colour(rgba: npt.NDArray[np.uint8], props: Any) -> tuple[int, int, int]:
    """Mean sRGB of the region's interior, else of all of it (the module docstring).

    Interior: the region's pixels whose four neighbours (up, down, left, right) are in the
    region too, i.e. an erosion by a 3x3 cross, written as array slices (about 30x faster
    than ``skimage.morphology.erosion`` on a large region, and without its import).
    """
    import numpy as np

    image = props.image
    padded = np.pad(image, 1)
    interior = image & padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    chosen = interior if interior.any() else image
    # a 0/1 weight vector times the (n, 3) pixels: sums of integers below 2**53 in float64,
    # exact in any summation order, so the result is the same on every machine
    weights = chosen.ravel().astype(np.float64)
    sums = weights @ rgba[props.slice][..., :3].astype(np.float64).reshape(-1, 3)
    count = float(weights.sum())
    r, g, b = (round(float(v) / count) for v in sums)
    return (r, g, b)


def size_class(area: int, image_pixels: int) -> str:
    """``small`` below 1 % of the image's pixels, ``medium`` below 5 %, else ``large``."""
    if area < SMALL_BELOW * image_pixels:
        return "small"
    if area < LARGE_FROM * image_pixels:
        return "medium"
    return "large"


def classify_shape(props: Any) -> str:
    """The shape key of one ``skimage.measure`` region (rules in the module docstring)."""
    area = float(props.area)
    top, left, bottom, right = props.bbox
    w, h = right - left, bottom - top
    extent = area / (w * h)
    if extent >= BOX_EXTENT_MIN:
        return "square" if max(w, h) <= SQUARE_SIDE_RATIO_MAX * min(w, h) else "rectangle"
    perimeter = float(props.perimeter_crofton)
    circularity = 4 * math.pi * area / perimeter**2 if perimeter > 0 else 0.0
    minor = float(props.axis_minor_length)
    axis_ratio = float(props.axis_major_length) / minor if minor > 0 else math.inf
    low, high = CIRCLE_EXTENT_RANGE
    if circularity >= CIRCLE_CIRCULARITY_MIN and axis_ratio <= CIRCLE_AXIS_RATIO_MAX and low <= extent <= high:
        return "circle"  # a circularity this high is only reached by near-discs, which are convex
    hull = _outline_hull(props.image)
    if len(hull) < 3 or area < SOLIDITY_MIN * _polygon_area(hull):
        return "other"
    if extent <= TRIANGLE_EXTENT_MAX and area <= TRIANGLE_AREA_RATIO_MAX * _largest_triangle(hull):
        return "triangle"
    return "other"


def _outline_hull(image: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """Corners ``(row, col)`` of the convex hull of a region mask's outline, in order.

    The outline runs along pixel edges, cutting corners diagonally: its points are the
    midpoints between each region pixel and a 4-neighbour outside it (the 0.5-level contour of
    the mask). Only the extreme ones can be hull corners, so per pixel row the leftmost and
    rightmost such point, and per gap between two rows the leftmost and rightmost pixel
    whose neighbour across the gap differs, are taken (at most ``4 * height + 2`` points;
    array operations, no contour tracing, so a checkerboard of a million pixels costs what a
    disc of that size does); the hull is ``scipy.spatial.ConvexHull``'s. For a region that is
    one 4-connected piece this is the hull of its outer contour; pieces joined only at a
    corner share one hull. Solidity is the region's pixel count over this hull's area, so
    holes lower it.
    """
    import numpy as np
    from scipy.spatial import ConvexHull, QhullError

    padded = np.pad(image, 1)
    columns = padded.shape[1]
    points = []
    for rows_of, offset, shift in ((padded, 0.0, 0.5), (padded[1:] != padded[:-1], 0.5, 0.0)):
        rows = np.flatnonzero(rows_of.any(axis=1))
        if not len(rows):
            continue
        first = rows_of[rows].argmax(axis=1)
        last = columns - 1 - rows_of[rows, ::-1].argmax(axis=1)
        points.append(np.stack([rows + offset, first - shift], axis=1))
        points.append(np.stack([rows + offset, last + shift], axis=1))
    if not points:
        return np.empty((0, 2))
    outline = np.unique(np.concatenate(points).astype(np.float64), axis=0)
    try:
        hull = ConvexHull(outline)
    except (QhullError, ValueError):  # all points on one line
        return np.empty((0, 2))
    corners: npt.NDArray[np.float64] = outline[hull.vertices]
    return corners


def _polygon_area(points: npt.NDArray[np.float64]) -> float:
    """Shoelace area of a closed or open polygon given as ``(n, 2)`` corners."""
    import numpy as np

    x, y = points[:, 0], points[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def _largest_triangle(hull: npt.NDArray[np.float64]) -> float:
    """Area of the largest triangle with corners among ``hull``'s (pixels²).

    The largest triangle in a region has its corners on the convex hull; a hull of more than
    120 corners is first simplified (``skimage.measure.approximate_polygon``, tolerance
    doubling from 0.5 pixel) so the search over all corner triples stays small.
    """
    import numpy as np
    from skimage.measure import approximate_polygon

    points = hull
    tolerance = 0.5
    while len(points) > 120:
        points = approximate_polygon(np.vstack([hull, hull[:1]]), tolerance)[:-1]
        tolerance *= 2
    if len(points) < 3:
        return 0.0
    # every triple (i, j, k) at once: |cross(b - a, c - a)| / 2
    a = points[:, None, None, :]
    b = points[None, :, None, :]
    c = points[None, None, :, :]
    ab, ac = b - a, c - a
    cross = np.abs(ab[..., 0] * ac[..., 1] - ab[..., 1] * ac[..., 0])
    return float(cross.max()) / 2


def reading_order(boxes: Sequence[tuple[int, int, int, int]]) -> list[int]:
    """Indices of ``(x, y, w, h)`` boxes in reading order (SPEC §15).

    Sorted by top edge, then left edge; a box joins the current row when its top edge is less
    than half the smaller of its height and the row's first box's height below that first
    box's top edge; rows top to bottom, each left to right (ties by index).
    """
    order = sorted(range(len(boxes)), key=lambda i: (boxes[i][1], boxes[i][0], i))
    rows: list[list[int]] = []
    for i in order:
        if rows:
            first = boxes[rows[-1][0]]
            if boxes[i][1] - first[1] < min(first[3], boxes[i][3]) / 2:
                rows[-1].append(i)
                continue
        rows.append([i])
    return [i for row in rows for i in sorted(row, key=lambda j: (boxes[j][0], boxes[j][1], j))]


# -------------------------------------------------------------------------- cropping


def crop_png(data: bytes, region: Region, *, padding: int = 4, max_side: int = 256) -> bytes:
    """The region's bounding box plus ``padding`` pixels (clipped to the image) as PNG bytes,
    scaled down (LANCZOS, aspect kept) so that neither side exceeds ``max_side`` pixels.

    For the editor's hover (a data-URI image). Raises :class:`ImageError` like :func:`decode_png`.
    """
    from PIL import Image

    image = decode_png(data)
    x, y, w, h = region.bbox
    box = (max(0, x - padding), max(0, y - padding),
           min(image.width, x + w + padding), min(image.height, y + h + padding))
    crop = image.crop(box)
    if max(crop.size) > max_side:
        scale = max_side / max(crop.size)
        crop = crop.resize((max(1, round(crop.width * scale)), max(1, round(crop.height * scale))),
                           Image.Resampling.LANCZOS)
    out = io.BytesIO()
    crop.save(out, format="PNG")
    return out.getvalue()


# --------------------------------------------------------------------------- sidecar


def sidecar_path(png_path: str) -> str:
    """The sidecar of ``images/a.png`` is ``images/a.png.yaml`` (SPEC §12)."""
    return png_path + ".yaml"


def parse_sidecar(data: bytes) -> FrontMatter:
    """Parse a ``NAME.png.yaml`` sidecar: a plain YAML mapping with the front-matter keys and
    rules of SPEC §3 (:func:`grounding_core.evidence.parse_front_matter` reads it).

    ``data`` are the raw bytes (UTF-8, BOM allowed; a leading ``---`` document marker is
    allowed). Raises :class:`EvidenceError` ``invalid-front-matter`` with the 1-based line of
    the sidecar for bytes that are not UTF-8, YAML errors, a second YAML document, a
    repeated key or a bad value. The result's ``end_line`` is 0 (an image has no lines).
    """
    try:
        text = strip_bom(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise EvidenceError(
            "invalid-front-matter", f"the sidecar is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
            line=data.count(b"\n", 0, exc.start) + 1, hint="Save the sidecar as UTF-8 text.",
        ) from None
    lines = split_lines(text)
    shift = 0 if lines[:1] == ["---"] else 1
    body = lines[1:] if shift == 0 else lines
    if "---" in body:
        raise EvidenceError(
            "invalid-front-matter", "the sidecar holds more than one YAML document",
            line=body.index("---") + 2 - shift, hint="Keep one mapping; remove the later '---' line.",
        )
    try:
        front = parse_front_matter(["---", *body, "---"])
    except EvidenceError as exc:
        raise EvidenceError(exc.name, exc.message, line=max(1, exc.line - shift), hint=exc.hint) from None
    return dataclasses.replace(front, end_line=0)


def image_doc_id(png_path: str, front: FrontMatter) -> str:
    """The doc_id of an image: the sidecar's ``doc_id``, else the path relative to the
    evidence root without ``.png`` (SPEC §3). Raises :class:`EvidenceError`
    ``invalid-front-matter`` when that default breaks the doc_id rule.
    """
    if front.doc_id is not None:
        return front.doc_id
    doc_id = default_doc_id(png_path)
    if not doc_id or DOC_ID_FORBIDDEN.search(doc_id):
        raise EvidenceError(
            "invalid-front-matter",
            f"the default doc_id {doc_id!r} (from the file path) holds whitespace, '@', ':', '[', ']' or '\"'",
            hint=f"Add a sidecar {sidecar_path(png_path.rpartition('/')[2])!r} with an explicit doc_id.",
        )
    return doc_id


def image_subject(doc_id: str, front: FrontMatter) -> str:
    """The sidecar's ``subject``, else the doc_id (SPEC §15: an image's subject is never none)."""
    return front.subject if front.subject is not None else doc_id


# --------------------------------------------------------------- the indexed document


IMAGE_TEXT_KIND = "grounding-image/1"
"""The ``kind`` of an image import event's text (see :func:`image_event_text`)."""


def is_image_path(rel_path: str) -> bool:
    """Whether an evidence path is an image document (SPEC §12: a ``.png`` file, any case)."""
    return rel_path.lower().endswith(".png")


def image_event_text(sidecar_text: str, measurement: Measurement) -> str:
    """The text an image's ``import`` event keeps in the log (SPEC §4: every version's content
    is kept): a JSON object ``{"kind", "sidecar", "measurement"}`` with the sidecar's text
    (BOM removed, "" without a sidecar) and :meth:`Measurement.to_dict`. Deterministic (sorted
    keys, no whitespace), so the same PNG with the same sidecar gives the same text.
    """
    import json

    return json.dumps({"kind": IMAGE_TEXT_KIND, "sidecar": sidecar_text, "measurement": measurement.to_dict()},
                      ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def read_image_event_text(text: str) -> tuple[str, dict[str, Any]] | None:
    """``(sidecar text, measurement dict)`` of an :func:`image_event_text`, or None when
    ``text`` is not one.
    """
    import json

    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("kind") != IMAGE_TEXT_KIND:
        return None
    sidecar, measurement = data.get("sidecar"), data.get("measurement")
    if not isinstance(sidecar, str) or not isinstance(measurement, dict):
        return None
    return sidecar, measurement


@dataclass(frozen=True)
class ImageDocument(EvidenceDocument):
    """An image version as the index reads it (SPEC §12): ``text`` is what its import event
    keeps (:func:`image_event_text`: the sidecar and the measurement); its *lines* are the
    regions' measured attributes, ``FIELD：VALUE`` in :data:`FIELDS` order, five per region (line
    :func:`attribute_line_number`), so each attribute is a field line of the version;
    ``front`` comes from the sidecar (``end_line`` 0: no line is front matter); ``subject``
    is the sidecar's or the doc_id. :meth:`line_subject` gives the conflict-key subject of one
    attribute line, ``SUBJECT#rN`` (SPEC §12: regions never conflict with each other).
    """

    measurement: Measurement | None = None

    @functools.cached_property
    def field_lines(self) -> dict[int, FieldLine]:
        out: dict[int, FieldLine] = {}
        if self.measurement is None:
            return out
        for region in self.measurement.regions:
            for index, (name, value) in enumerate(region.attributes):
                out[attribute_line_number(region.number, index)] = FieldLine(f"{name}：{value}", name, value)
        return out

    @functools.cached_property
    def subject(self) -> str | None:
        return image_subject(self.doc_id, self.front)

    def line_subject(self, line: int) -> str:
        """``SUBJECT#rN`` for an attribute line of region N."""
        return f"{self.subject}#r{attribute_of_line(line)[0]}"


def image_document(rel_path: str, sha256: str, sidecar_text: str, measurement: Measurement,
                   language: str = "zh") -> ImageDocument:
    """The :class:`ImageDocument` of one PNG (``sha256`` of its bytes) with its sidecar's text.

    Raises :class:`EvidenceError` ``invalid-front-matter`` for a bad sidecar or default doc_id.
    """
    front = parse_sidecar(sidecar_text.encode("utf-8")) if sidecar_text else FrontMatter()
    doc_id = image_doc_id(rel_path, front)
    measured = measurement.in_language(language)
    lines = tuple(line for region in measured.regions for line in attribute_lines(region))
    return ImageDocument(path=rel_path, sha256=sha256, text=image_event_text(sidecar_text, measurement),
                         lines=lines, front=front, doc_id=doc_id, separators=("：",), subject_fields=(),
                         measurement=measured)


def sidecar_text(data: bytes) -> str:
    """The text of a sidecar's bytes (BOM removed), after :func:`parse_sidecar` accepted them.

    Raises :class:`EvidenceError` ``invalid-front-matter`` as :func:`parse_sidecar` does, with
    the message naming the sidecar.
    """
    try:
        parse_sidecar(data)
    except EvidenceError as exc:
        message = exc.message.replace("the front matter", "the sidecar").replace("front matter", "the sidecar")
        text = (f"{message} (line {exc.line})" if message.startswith("the sidecar")
                else f"the sidecar, line {exc.line}: {message}")
        hint = (exc.hint if exc.hint and "---" not in exc.hint else
                SIDECAR_HINT if exc.hint or "mapping" in message else SIDECAR_VALUE_HINT)
        raise EvidenceError(exc.name, text, line=1, hint=hint) from None
    return strip_bom(data.decode("utf-8"))


SIDECAR_HINT = ("Write the sidecar as one YAML mapping, one 'key: value' a line (doc_id, subject, title,"
                " version, status, effective_from, effective_until), e.g. 'doc_id: shapes'.")
"""The hint of a sidecar finding about its shape (front matter's hint speaks of '---' lines)."""
SIDECAR_VALUE_HINT = ("Fix that value in the sidecar: its keys take what front matter takes (version a"
                      " positive integer, status active or revoked, dates YYYY-MM-DD, text for the others).")
"""The hint of a sidecar finding about one value, where front matter gives none."""


def image_document_from_event(rel_path: str, sha256: str, text: str, language: str = "zh") -> ImageDocument | None:
    """The document of an image import event's text (:func:`image_event_text`), or None when
    the text is not an image's or its measurement is of another :data:`MEASUREMENT_VERSION`.
    """
    parsed = read_image_event_text(text)
    if parsed is None:
        return None
    sidecar, data = parsed
    try:
        measurement = Measurement.from_dict(data)
        return image_document(rel_path, sha256, sidecar, measurement, language)
    except (ValueError, EvidenceError):
        return None
