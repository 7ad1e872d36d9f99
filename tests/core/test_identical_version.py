"""tryout2 #13: a stray file sharing a doc_id (no declared version) is indexed as the next
version; once it is removed the original file is read again as yet another version with the
same sha256 as the first. The log stays append-only and versions are never reused (SPEC §3,
§4), so the first version's citations are ``stale-citation``; the message says the content is
byte-identical and which file came in between, and the re-anchor is exact (docs/decisions.md,
"Index"). CJK, emoji and CRLF.
"""

from __future__ import annotations

import time

from support import MakeWorkspace, only, sha256

from grounding_core.fixes import apply_edits

SHIPPING = "---\r\ndoc_id: shipping\r\n---\r\n- 发货时间：付款后48小时内 🎉\r\n"
STRAY = "---\r\ndoc_id: shipping\r\n---\r\n- 发货时间：付款后24小时内 𠮷\r\n"
LINE = "- 发货时间：付款后48小时内 🎉"


def draft(version: int) -> str:
    return ("---\r\nfields: [发货时间]\r\n---\r\n发货时间是付款后48小时内 🎉[^1]。\r\n\r\n"
            f'[^1]: shipping@{version}:4 sha256:{sha256(SHIPPING)[:12]} "{LINE}"\r\n')


def test_the_same_bytes_back_are_a_new_version_whose_stale_citation_says_identical(
        make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/shipping.md": SHIPPING, "answers/a.md": draft(1)})
    assert ws.check_file("answers/a.md").error_count == 0
    (ws.config.evidence_root / "a-stray.md").write_bytes(STRAY.encode())  # sorts first: indexed
    time.sleep(0.15)
    ws.scan()
    (ws.config.evidence_root / "a-stray.md").unlink()
    ws.scan()
    versions = ws.store.snapshot().versions("shipping")
    assert sorted(versions) == [1, 2, 3] and versions[3].sha256 == versions[1].sha256  # never reused
    finding = only(ws.check_file("answers/a.md"), "stale-citation")
    assert finding.message == (
        "shipping@1:4 cites version 1, but version 3 of 'shipping' is current; version 3 is"
        f" byte-identical to version 1 (the same sha256 {sha256(SHIPPING)[:12]}): version 2 in between"
        " came from evidence/a-stray.md, which shares the doc_id 'shipping'")
    assert finding.hint.startswith("Re-anchor to shipping@3:4: the content is byte-identical")
    assert finding.fix is not None
    text = (ws.config.root / "answers/a.md").read_bytes().decode("utf-8")
    fixed = apply_edits(text, [finding.fix])
    assert fixed == draft(3)  # the same line, the same hash: only the version changes
    assert ws.check_text("answers/a.md", fixed).error_count == 0


def test_a_changed_content_keeps_the_plain_stale_message(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/shipping.md": SHIPPING, "answers/a.md": draft(1)})
    (ws.config.evidence_root / "shipping.md").write_bytes((SHIPPING + "- 地点：二楼\r\n").encode())
    time.sleep(0.15)
    ws.scan()
    finding = only(ws.check_file("answers/a.md"), "stale-citation")
    assert finding.message == "shipping@1:4 cites version 1, but version 2 of 'shipping' is current"
    assert "byte-identical" not in finding.hint
