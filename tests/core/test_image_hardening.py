"""Hostile image evidence (SPEC §2, §12): what the image tryout broke, one test per fix.

Every PNG is made in the test (Pillow, or the chunks written with ``zlib`` where Pillow cannot
make the file: a 30000x30000 header over a tiny compressed stream); every workspace is real
(files on disk, the SQLite store, ``Workspace.scan`` and ``Workspace.check_text``).

- a sidecar that is a symlink out of the evidence folder, or a named pipe, is refused and
  never read (a FIFO used to block the scan for ever);
- the hover's PNG read (``navigate.version_bytes``) never follows a symlink out of the folder;
- a decompression bomb is refused naming its size, before a pixel is decoded;
- 16-bit grey PNGs are measured, not clipped to white (with and without ``tRNS``);
- a file cut inside its header says so, without Python object reprs;
- the outline hull needs no contour tracing (a checkerboard is one region), and pieces that
  touch only at a corner share one hull;
- thousands of interleaved stripes are refused by the sum of their boxes, not measured for
  hours;
- a quote whose colon is the ASCII ':' names it.
"""

from __future__ import annotations

import io
import os
import struct
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw
from support import MakeWorkspace, check, names, only, sha256

from grounding_core.images import MAX_BOX_PIXELS, ImageError, _outline_hull, _polygon_area, measure
from grounding_core.model import CitationRef
from grounding_core.navigate import locate, version_bytes

RED = (230, 30, 30)


def png(image: Image.Image, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", **options)
    return out.getvalue()


def panel() -> bytes:
    image = Image.new("RGB", (200, 200), (255, 255, 255))
    ImageDraw.Draw(image).ellipse([20, 20, 99, 99], fill=RED)
    return png(image)


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def raw_png(width: int, height: int, depth: int, colour_type: int, rows: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, depth, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9))
            + chunk(b"IEND", b""))


def bomb(side: int = 30000) -> bytes:
    """A 1-bit ``side`` x ``side`` PNG, all black: about 110 KB on disk, 900 megapixels decoded."""
    packer = zlib.compressobj(9)
    row = b"\x00" * (1 + (side + 7) // 8)
    stream = b"".join(packer.compress(row) for _ in range(side)) + packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", stream) + chunk(b"IEND", b"")


def draft(definition: str, sentence: str = "警示灯是红色的[^1]。") -> str:
    return "\r\n".join(["---", "question: 警示灯是什么颜色？", "fields: [颜色]", "---", sentence, "",
                        definition, ""])


# ------------------------------------------------------------------------------ sidecars


def test_a_sidecar_symlinked_out_of_the_evidence_folder_is_refused_and_never_read(
        make_workspace: MakeWorkspace, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.yaml"
    outside.write_text("doc_id: 泄露\nsubject: 机密🎉\n", encoding="utf-8")
    ws = make_workspace({"evidence/面板.png": panel()}, scan=False)
    (ws.config.evidence_root / "面板.png.yaml").symlink_to(outside)
    ws.scan()
    snapshot = ws.store.snapshot()
    assert snapshot.versions("泄露") == {} and snapshot.versions("面板") == {}
    finding = only(ws.store.evidence_findings()["面板.png"], "invalid-front-matter")
    assert "outside the evidence folder" in finding.message and "not read" in finding.message
    assert "Copy the sidecar into the evidence folder" in finding.hint


def test_a_sidecar_that_is_a_named_pipe_is_refused_without_blocking_the_scan(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/面板.png": panel()}, scan=False)
    fifo = ws.config.evidence_root / "面板.png.yaml"
    os.mkfifo(fifo)
    scan = threading.Thread(target=ws.scan, daemon=True)
    scan.start()
    scan.join(60)
    if scan.is_alive():  # blocked in open(): give it a writer so the thread ends, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        scan.join(10)
        pytest.fail("the scan blocked opening a FIFO sidecar")
    finding = only(ws.store.evidence_findings()["面板.png"], "invalid-front-matter")
    assert "named pipe" in finding.message and "面板.png.yaml" in finding.hint


def test_a_sidecar_value_of_the_wrong_type_names_the_line_and_how_to_fix_it(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/面板.png": panel(), "evidence/面板.png.yaml": "doc_id: 面板\r\nversion: 二\r\n"})
    finding = only(ws.store.evidence_findings()["面板.png"], "invalid-front-matter")
    assert finding.message.startswith("the sidecar, line 2: version:")
    assert "version a positive integer" in finding.hint
    ws.store.close()  # on a shared index the first store would stay its writer and the rescan append nothing
    ws = make_workspace({"evidence/面板.png.yaml": "- doc_id\r\n- 面板\r\n"})
    finding = only(ws.store.evidence_findings()["面板.png"], "invalid-front-matter")
    assert finding.message == "the sidecar must be a mapping of keys to values (line 1)"
    assert "'key: value'" in finding.hint and "---" not in finding.hint


def test_the_hover_read_of_an_image_never_follows_a_symlink_out_of_the_folder(
        make_workspace: MakeWorkspace, tmp_path_factory: pytest.TempPathFactory) -> None:
    data = panel()
    ws = make_workspace({"evidence/面板.png": data})
    record = ws.store.snapshot().newest("面板")
    assert record is not None and version_bytes(ws.config.evidence_root, record) == data
    copy = tmp_path_factory.mktemp("elsewhere") / "same.png"
    copy.write_bytes(data)  # the same bytes, so only the path rule can refuse it
    path = ws.config.evidence_root / "面板.png"
    path.unlink()
    path.symlink_to(copy)
    assert version_bytes(ws.config.evidence_root, record) is None



def test_go_to_definition_never_hangs_on_a_fifo_or_follows_a_symlink_where_a_cited_file_was(
        make_workspace: MakeWorkspace, tmp_path_factory: pytest.TempPathFactory) -> None:
    """``navigate.locate`` hashes the newest version's file to decide whether the editor may open
    it: that read is the evidence read (SPEC §2), so a FIFO put in the file's place answers "not
    on disk" at once and a symlink out of the folder is never read.
    """
    text = "---\r\ndoc_id: 通知\r\n---\r\n- 地点：一号楼🎉\r\n"
    ws = make_workspace({"evidence/通知.md": text})
    snapshot = ws.store.snapshot()
    citation = CitationRef("通知", 1, 4)
    where = locate(citation, snapshot, ws.config.evidence_root)
    assert where is not None and where.on_disk and where.lines[3] == "- 地点：一号楼🎉"
    path = ws.config.evidence_root / "通知.md"
    outside = tmp_path_factory.mktemp("elsewhere") / "通知.md"
    outside.write_bytes(text.encode("utf-8"))  # the same bytes: only the path rule refuses them
    path.unlink()
    path.symlink_to(outside)
    where = locate(citation, snapshot, ws.config.evidence_root)
    assert where is not None and not where.on_disk
    path.unlink()
    os.mkfifo(path)
    done: list[bool] = []
    reader = threading.Thread(target=lambda: done.append(
        locate(citation, snapshot, ws.config.evidence_root).on_disk), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(10)
    if reader.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
        pytest.fail("go to definition blocked opening a FIFO")
    assert done == [False]

# ------------------------------------------------------------------------------ decoding


def test_a_decompression_bomb_is_refused_naming_its_size_before_decoding(make_workspace: MakeWorkspace) -> None:
    data = bomb()
    assert len(data) < 200_000
    with pytest.raises(ImageError) as caught:
        measure(data)
    assert "30000x30000 pixels is more than the 25,000,000" in caught.value.message
    assert "Scale the image down" in caught.value.hint
    ws = make_workspace({"evidence/炸弹🎉.png": data, "evidence/面板.png": panel()})
    finding = only(ws.store.evidence_findings()["炸弹🎉.png"], "unreadable-evidence")
    assert "30000x30000" in finding.message
    assert ws.store.snapshot().newest("面板") is not None  # the rest of the folder is indexed


def grey16(transparent: int | None = None) -> bytes:
    """200x200 16-bit grey: white, a disc of level 20000 (8-bit 78) at the top left."""
    levels = np.full((200, 200), 65535, dtype=">u2")
    yy, xx = np.mgrid[:200, :200]
    levels[(yy - 60) ** 2 + (xx - 60) ** 2 < 40 ** 2] = 20000
    rows = b"".join(b"\x00" + levels[y].tobytes() for y in range(200))
    data = raw_png(200, 200, 16, 0, rows)
    if transparent is not None:  # tRNS before IDAT
        at = data.index(b"IDAT") - 4
        data = data[:at] + chunk(b"tRNS", struct.pack(">H", transparent)) + data[at:]
    return data


@pytest.mark.parametrize("transparent", [None, 65535])
def test_16_bit_grey_is_measured_with_its_levels_scaled_not_clipped(transparent: int | None) -> None:
    m = measure(grey16(transparent))
    assert [(r.bbox, r.mean_rgb, r.color, r.shape) for r in m.regions] == [
        ((21, 21, 79, 79), (78, 78, 78), "gray", "circle")]
    assert m.background == (None if transparent is not None else (252, 252, 252))


def test_a_file_cut_inside_its_header_says_so_without_python_reprs() -> None:
    for data in (b"\x89PNG\r\n\x1a\n", panel()[:20]):
        with pytest.raises(ImageError) as caught:
            measure(data)
        assert "header is damaged or the file is cut short" in caught.value.message
        assert "object at 0x" not in caught.value.message and "unpack" not in caught.value.message


# ------------------------------------------------------------------------------ regions


def test_pieces_touching_only_at_a_corner_share_one_outline_hull() -> None:
    mask = np.zeros((40, 40), dtype=bool)
    mask[:20, :20] = True
    mask[20:30, 20:30] = True  # touches the big square at one corner: one 8-connected region
    hull = _outline_hull(mask)
    # the hull of both squares: 30x30 less the two empty corner triangles (10x20 / 2 each) and the
    # outline's cut corners; the big square's alone would be about 400
    assert _polygon_area(hull) == pytest.approx(30 * 30 - 2 * (10 * 20 / 2), abs=12)


def test_a_checkerboard_is_one_region_measured_without_tracing_its_contours() -> None:
    cells = (np.indices((600, 600)).sum(axis=0) % 2 * 255).astype(np.uint8)
    (region,) = measure(png(Image.fromarray(cells))).regions
    assert (region.bbox, region.area, region.shape) == ((0, 0, 600, 600), 600 * 600 // 2, "other")


def test_interleaved_stripes_whose_boxes_exceed_the_bound_are_refused() -> None:
    size = 2000
    diagonal = np.indices((size, size)).sum(axis=0)
    stripes = ((diagonal % 8) < 4).astype(np.uint8) * 255  # ~500 stripes, each boxed by much of the image
    with pytest.raises(ImageError) as caught:
        measure(png(Image.fromarray(stripes)))
    assert "bounding boxes hold" in caught.value.message and f"{MAX_BOX_PIXELS:,}" in caught.value.message
    assert "split it into several images" in caught.value.hint


def test_hundreds_of_small_regions_are_each_measured_in_reading_order() -> None:
    image = Image.new("RGB", (1000, 1000), (255, 255, 255))
    pen = ImageDraw.Draw(image)
    for row in range(25):
        for col in range(25):
            pen.rectangle([col * 40 + 5, row * 40 + 5, col * 40 + 24, row * 40 + 24], fill=RED)
    regions = measure(png(image)).regions
    assert len(regions) == 625
    assert [r.bbox[:2] for r in regions[:3]] == [(5, 5), (45, 5), (85, 5)] and regions[25].bbox[:2] == (5, 45)
    assert {(r.color, r.shape, r.size) for r in regions} == {("red", "square", "small")}


# ------------------------------------------------------------------------------ citations


@pytest.mark.parametrize("typed, named", [(":", "the ASCII ':'"), ("∶", "U+2236")])
def test_a_quote_with_a_colon_look_alike_names_it_and_the_fix(make_workspace: MakeWorkspace, typed: str,
                                                              named: str) -> None:
    data = panel()
    ws = make_workspace({"evidence/面板.png": data, "evidence/面板.png.yaml": "doc_id: 面板\r\n"})
    text = draft(f'[^1]: 面板@1#r1 sha256:{sha256(data)[:12]} "颜色{typed}红色"')
    report = check(ws, "answers/a.md", text)
    finding = only(report, "quote-mismatch")
    assert named in finding.message and "full-width colon '：'" in finding.message
    assert finding.hint == 'Quote "颜色：红色".'
    fixed = check(ws, "answers/b.md", text.replace(f"颜色{typed}红色", "颜色：红色"))
    assert "quote-mismatch" not in names(fixed)


def test_a_png_evidence_path_that_is_not_a_regular_file_is_skipped(make_workspace: MakeWorkspace,
                                                                    tmp_path: Path) -> None:
    ws = make_workspace({"evidence/面板.png": panel()}, scan=False)
    os.mkfifo(ws.config.evidence_root / "管道.png")
    ws.scan()
    assert ws.store.snapshot().newest("面板") is not None and ws.store.snapshot().versions("管道") == {}


@pytest.mark.parametrize("region, says", [
    ("r0", "regions are numbered from r1 (in reading order); there is no r0"),
    ("r01", "the region number '01' has a leading zero; write 面板@1#r1"),
    ("r１", "the region number '１' has full-width digits; write 面板@1#r1"),
    ("r1:3", "a region is cited without a line: write 面板@1#r1"),
    ("rX", "the region number 'X' must be a positive integer, e.g. 面板@1#r1"),
])
def test_a_bad_region_number_says_what_to_write(make_workspace: MakeWorkspace, region: str, says: str) -> None:
    data = panel()
    ws = make_workspace({"evidence/面板.png": data, "evidence/面板.png.yaml": "doc_id: 面板\r\n"})
    report = check(ws, "answers/a.md", draft(f'[^1]: 面板@1#{region} sha256:{sha256(data)[:12]} "颜色：红色"'))
    assert says in only(report, "malformed-citation").message


def test_a_citation_of_a_png_that_is_not_indexed_points_at_its_finding(make_workspace: MakeWorkspace) -> None:
    data = panel()
    ws = make_workspace({"evidence/图片/坏🎉.png": data[: len(data) // 2]})
    assert names(ws.store.evidence_findings()["图片/坏🎉.png"]) == ["unreadable-evidence"]
    report = check(ws, "answers/a.md", draft(f'[^1]: 图片/坏🎉@1#r1 sha256:{sha256(data)[:12]} "颜色：红色"'))
    finding = only(report, "unknown-source")
    assert "the image 图片/坏🎉.png is in the evidence folder but is not indexed" in finding.message
    assert finding.hint == "Fix 图片/坏🎉.png as its finding says, or cite another source."
    other = check(ws, "answers/b.md", draft(f'[^1]: 图片/无@1#r1 sha256:{sha256(data)[:12]} "颜色：红色"'))
    assert "not indexed" not in only(other, "unknown-source").message


def test_version_reuse_of_an_image_tells_to_raise_the_version_in_its_sidecar(make_workspace: MakeWorkspace,
                                                                              tmp_path: Path) -> None:
    ws = make_workspace({"evidence/图/面板.png": panel(),
                         "evidence/图/面板.png.yaml": "doc_id: 面板\r\nversion: 1\r\n"})
    blue = Image.new("RGB", (200, 200), (255, 255, 255))
    ImageDraw.Draw(blue).ellipse([20, 20, 99, 99], fill=(30, 60, 220))
    (tmp_path / "evidence/图/面板.png").write_bytes(png(blue))
    ws.scan()
    finding = only(ws.store.evidence_findings()["图/面板.png"], "version-reuse")
    assert finding.hint.startswith("Raise 'version' in the sidecar 面板.png.yaml whenever the image changes")
