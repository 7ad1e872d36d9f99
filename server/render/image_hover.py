r"""The hover of an image citation ``DOC_ID@VERSION#rN`` (SPEC §10, §12).

Layout (Markdown): the title and the citation id; the region cropped from the image, as a
Markdown image whose source is a ``data:image/png;base64,…`` URI of a small PNG (the region's
box plus 4 pixels, scaled down so neither side exceeds :data:`CROP_MAX_SIDE` pixels;
``grounding_core.images.crop_png``); the region's five measured attributes as a list, the
quoted one marked, with what the quote says when it differs (another value, or an attribute
that is not measured: GR117); then the document facts (version, status, sha256 prefix, file).
A stale citation adds what the newest version measures for the same region.

The crop needs the cited version's pixels: the index keeps every version's measurement but
not its bytes, so the image is shown only while the PNG file still holds exactly that content
(``png`` is None otherwise, and the hover says so). Nothing is written anywhere: the crop
travels inside the hover. Crops are remembered in a small LRU by (sha256, region box), so
hovering the same citation again decodes nothing. Pure apart from that cache; call it in a
worker thread (decoding a 4-megapixel PNG takes tens of milliseconds).
"""

from __future__ import annotations

import base64
import datetime as dt
import threading
from collections import OrderedDict

from grounding_core.config import Config
from grounding_core.image_claims import split_quote
from grounding_core.images import ImageError, Measurement, Region, crop_png, measured_fields
from grounding_core.index import IndexSnapshot, VersionRecord
from grounding_core.navigate import RegionTarget

__all__ = ["CROP_MAX_SIDE", "crop_data_uri", "region_hover"]

CROP_MAX_SIDE = 192
"""Longest side, in pixels, of the crop shown in a hover."""
_CACHE_SIZE = 64
_crops: OrderedDict[tuple[str, tuple[int, int, int, int]], str] = OrderedDict()
_lock = threading.Lock()


def crop_data_uri(png: bytes, sha256: str, region: Region) -> str | None:
    """The region of ``png`` (whose sha256 is ``sha256``) as a ``data:image/png;base64,`` URI,
    or None when the bytes do not decode. Remembered by (sha256, bbox).
    """
    key = (sha256, region.bbox)
    with _lock:
        if key in _crops:
            _crops.move_to_end(key)
            return _crops[key]
    try:
        data = crop_png(png, region, max_side=CROP_MAX_SIDE)
    except ImageError:
        return None
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    with _lock:
        _crops[key] = uri
        while len(_crops) > _CACHE_SIZE:
            _crops.popitem(last=False)
    return uri


def _code(text: str) -> str:
    ticks = "``" if "`" in text else "`"
    return f"{ticks}{text}{ticks}"


def _status(snapshot: IndexSnapshot, record: VersionRecord, today: dt.date) -> str:
    reason = snapshot.inactive_reason(record, today)
    return "active" if reason is None else f"inactive — {reason}"


def region_hover(target: RegionTarget, snapshot: IndexSnapshot, config: Config, today: dt.date,
                 png: bytes | None) -> str:
    """The Markdown hover of one image citation (layout in the module docstring).

    ``png`` are the bytes of the cited version's file when it still holds that content.
    """
    ref = target.region
    language = config.image_language
    newest = snapshot.newest(ref.doc_id)
    if newest is None:
        return f"**Unknown source:** no document {_code(ref.doc_id)} is in the index (cited as {_code(ref.id)})."
    record = snapshot.record(ref.doc_id, ref.version)
    if record is None:
        if ref.version > newest.version:
            return (f"**Unknown version:** {_code(ref.doc_id)} has no version {ref.version}; the newest"
                    f" is version {newest.version}.")
        return (f"**Stale citation:** {_code(ref.id)} cites version {ref.version}, which was never"
                f" indexed; the newest is version {newest.version}.")
    stored = snapshot.measurement(record.sha256)
    if stored is None:
        return (f"**Not an image:** {_code(f'{ref.doc_id}@{ref.version}')} is a text document; cite one"
                f" of its lines as {_code(f'{ref.doc_id}@{ref.version}:LINE')}.")
    measurement = stored.in_language(language)
    title = _title(snapshot, record)
    parts = [f"**{title}** · {_code(ref.id)}"]
    region = measurement.region(ref.name)
    if region is None:
        count = len(measurement.regions)
        parts.append(f"**Unknown region:** the image has {count} measured region(s); there is no {ref.name}.")
        parts.append(_regions_overview(measurement))
        parts.append(_facts(snapshot, record, config, today, target.hash_prefix))
        return "\n\n".join(parts)
    if record.version < newest.version:
        parts.append(f"**Stale citation:** version {record.version} is cited; the newest is version"
                     f" {newest.version}.")
    if png is not None:
        uri = crop_data_uri(png, record.sha256, region)
        if uri is not None:
            parts.append(f"![{ref.id}]({uri})")
    else:
        parts.append("*The image file no longer holds this version, so its pixels cannot be shown;"
                     " the attributes below are the index's measurement of it.*")
    parts.append(f"Region {ref.name} of a {measurement.width}×{measurement.height} image (measured):\n\n"
                 + _attributes(region, target.quote, config))
    if record.version < newest.version:
        parts.append(_newest(snapshot, newest, ref.name, language))
    if not target.used:
        parts.append("*No reference in the draft uses this definition, so it is not checked.*")
    parts.append(_facts(snapshot, record, config, today, target.hash_prefix))
    return "\n\n".join(parts)


def _title(snapshot: IndexSnapshot, record: VersionRecord) -> str:
    title = getattr(record, "title", "") or ""
    if not title:
        try:
            title = snapshot.document(record).title
        except (KeyError, ValueError):
            title = record.doc_id
    return "".join("\\" + ch if ch in "\\`*_[]<>#|" else ch for ch in title)


def _attributes(region: Region, quote: str | None, config: Config) -> str:
    quoted = split_quote(quote, config.field_separators) if quote is not None else None
    rows = []
    for name, value in region.attributes:
        row = f"- {name}：{value}"
        if quoted is not None and quoted[0] == name:
            row = f"- **{name}：{value}** ← quoted" + ("" if quoted[1] == value else
                                                      f" as {_code(quote or '')}, which is not what is measured")
        rows.append(row)
    if quoted is not None and quoted[0] not in measured_fields(region.language):
        rows.append(f"- {_code(quote or '')} ← quoted, but **{quoted[0]} is not measured** (only"
                    f" {', '.join(measured_fields(region.language))} are; GR117)")
    return "\n".join(rows)


def _regions_overview(measurement: Measurement) -> str:
    if not measurement.regions:
        return "No region was found in this image."
    rows = [f"- {r.name}: " + " ".join(v for _, v in r.attributes[2:]) + f" at {r.attributes[0][1]}"
            for r in measurement.regions[:20]]
    more = len(measurement.regions) - 20
    return "Regions:\n" + "\n".join(rows) + (f"\n- … and {more} more" if more > 0 else "")


def _newest(snapshot: IndexSnapshot, newest: VersionRecord, region: str, language: str) -> str:
    stored = snapshot.measurement(newest.sha256)
    now = stored.in_language(language).region(region) if stored is not None else None
    if now is None:
        return f"Newest version {newest.version}: {region} no longer exists."
    return (f"Newest version {newest.version}, {region}: "
            + ", ".join(f"{k}：{v}" for k, v in now.attributes) + ".")


def _facts(snapshot: IndexSnapshot, record: VersionRecord, config: Config, today: dt.date,
           cited_hash: str | None) -> str:
    newest = snapshot.newest(record.doc_id)
    sha = f"sha256: {_code(record.sha256[:12])}"
    if cited_hash and not record.sha256.startswith(cited_hash):
        sha += f" — the citation's {_code(cited_hash[:12])} does not match"
    rows = [
        f"- Document: {_code(f'{record.doc_id}@{record.version}')}"
        + (f" (newest: {newest.version})" if newest is not None else ""),
        f"- Status: {_status(snapshot, record, today)}",
        f"- {sha}",
        f"- File: {_code(config.evidence_display(record.path) if record.path else '(no file)')}",
    ]
    return "\n".join(rows)
