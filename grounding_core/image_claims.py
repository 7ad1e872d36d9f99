"""Image claims: citations of one measured attribute of one region of a PNG (SPEC §12, §15).

The grammar (this module) and the check (:func:`check_region_claim`) of a claim such as

    [^2]: shapes@1#r2 sha256:9f86d0818ab1 "颜色：绿色"

``DOC_ID@VERSION#rN`` names region N (1-based, reading order) of one version of an image
document; the quote is ``FIELD：VALUE``, one of the five measured attributes of
:mod:`grounding_core.images` in the configured ``image_language``. A JSON image claim has
exactly :data:`~grounding_core.model.IMAGE_CLAIM_KEYS`: ``region`` (``"r2"``) instead of
``line``, ``text`` = ``quote`` = ``FIELD：VALUE`` and ``support_type: "measured"``.

Checks (SPEC §7.1 for images, §15):

- the doc_id, version and region must exist (GR102; a text document cited with ``#rN`` and an
  image cited with ``:LINE`` are GR102 too, naming the other form), the version must be the
  newest (GR104) and active (GR106), the hash a prefix of the version's sha256 (GR105);
- the quote's field must be measured (else GR117 ``unsupported-attribute``, and no GR103 for
  it: ``材质：塑料`` is not wrong about the picture, it is unsupportable), and its value must be
  the measured one, verbatim (GR103, naming the measured value);
- a stale or re-saved image names the old and the new measured value of the cited attribute;
- visibility (SPEC §6): the cited attribute is visible when its line lies in the context, as
  for text: the whole version (``shapes@1``), a line range over the image's attribute lines
  (``shapes@1:1-5`` is r1, five lines per region; a context log's ``lines``), or a text unit
  holding the line ``FIELD：VALUE``.

Measured values come from the index (``IndexSnapshot.measurement``: the measurement of a
content, cached by its sha256 when the scan read it); nothing here decodes a PNG.

Pure: no files, no network. Spans are 0-based lines and code-point columns of the draft.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .evidence import DOC_ID_FORBIDDEN
from .images import Measurement, Region, attribute_line_number, is_image_path, measured_fields
from .memory import checked_claim_id
from .model import IMAGE_CLAIM_KEYS, Edit, Finding, Location, RegionRef, Span
from .text import shorten

if TYPE_CHECKING:
    from .config import Config
    from .index import IndexSnapshot, VersionRecord

SUPPORT_TYPE = "measured"
"""``support_type`` of every image claim (SPEC §12); text claims carry none (docs/decisions.md)."""

ATTRIBUTE_SEPARATOR = "："
"""The separator an image quote is written with (``颜色：红色``, SPEC §12). A configured
``field_separators`` entry is accepted too."""

_NUMBER = r"[1-9][0-9]{0,17}"  # drafts.NUMBER (imported there from here would be circular)


@functools.cache
def _region_id_re() -> re.Pattern[str]:
    return re.compile(rf"(?P<doc_id>[^\s@:\[\]\"]+)@(?P<version>{_NUMBER})#r(?P<region>{_NUMBER})")


def is_region_id(id_text: str) -> bool:
    """Whether ``id_text`` is meant as a region id: a ``#`` (or full-width ``＃``) after its
    last ``@``. Such an id is parsed by :func:`parse_region_id`, never as ``DOC_ID@VERSION:LINE``.
    """
    _, at, tail = id_text.rpartition("@")
    return bool(at) and ("#" in tail or "＃" in tail)


def parse_region_id(id_text: str) -> tuple[RegionRef | None, str]:
    """``DOC_ID@VERSION#rN`` -> a :class:`RegionRef`, or None and the reason it is not one."""
    m = _region_id_re().fullmatch(id_text)
    if m is not None:
        return RegionRef(m["doc_id"], int(m["version"]), int(m["region"])), ""
    shown = shorten(id_text, 60, quote=True)
    doc_id, _, rest = id_text.rpartition("@")
    if not doc_id or DOC_ID_FORBIDDEN.search(doc_id):
        return None, f"{shown}: the doc_id is empty or holds whitespace, '@', ':', '[', ']' or '\"'"
    if "#" not in rest and "＃" not in rest:
        return None, (f"{shown} is not a region id: an image claim cites DOC_ID@VERSION#rN, e.g."
                      f" {doc_id}@1#r1 (#r and its number), not a line")
    version, _, region = rest.replace("＃", "#").partition("#")
    if not re.fullmatch(r"[1-9][0-9]{0,17}", version):
        return None, (f"{shown}: the version {shorten(version, 20, quote=True)} must be a positive"
                      " integer (no leading zeros)")
    if "＃" in rest:
        return None, f"{shown}: the '#' before the region is the full-width '＃'; write the ASCII '#'"
    if not region.startswith("r"):
        return None, (f"{shown}: a region is written #r and its number, e.g. {doc_id}@{version}#r1"
                      " (regions are numbered r1, r2, … in reading order)")
    return None, f"{shown}: {_region_number_problem(doc_id, version, region[1:])}"


def _region_number_problem(doc_id: str, version: str, number: str) -> str:
    """What is wrong with the text after ``#r`` of a region id, and what to write instead."""
    import unicodedata

    shown = shorten(number, 20, quote=True)
    ascii_form = unicodedata.normalize("NFKC", number)
    if ascii_form != number and re.fullmatch(r"[1-9][0-9]{0,17}", ascii_form):
        kind = "full-width digits" if all("０" <= c <= "９" or c.isascii() for c in number) else "non-ASCII digits"
        return f"the region number {shown} has {kind}; write {doc_id}@{version}#r{ascii_form}"
    if re.fullmatch(r"0+", number):
        return f"regions are numbered from r1 (in reading order); there is no r{number}"
    if re.fullmatch(r"0+[1-9][0-9]*", number):
        return f"the region number {shown} has a leading zero; write {doc_id}@{version}#r{number.lstrip('0')}"
    if re.fullmatch(r"[1-9][0-9]{18,}", number):  # a positive integer, but no image has that many regions
        return (f"the region number {shown} ({len(number)} digits) is too large: regions are numbered"
                f" r1, r2, … in reading order; list them with `grounding cite {doc_id}@{version}`")
    head = re.match(r"[1-9][0-9]*", number)
    if head is not None and number[head.end():head.end() + 1] == ":":
        return (f"a region is cited without a line: write {doc_id}@{version}#r{head[0]} (the quote names"
                " the attribute)")
    return f"the region number {shown} must be a positive integer, e.g. {doc_id}@{version}#r1"


def definition_shape(label: str) -> str:
    return f'write it as [^{label}]: DOC_ID@VERSION#rN sha256:HASH "FIELD：VALUE", e.g. "颜色：红色"'


# ---------------------------------------------------------------------- JSON claims


def is_json_image_claim(claim: Any) -> bool:
    """A JSON claim object meant as an image claim: it has ``region`` (SPEC §12)."""
    return isinstance(claim, dict) and "region" in claim


@dataclass(frozen=True, slots=True)
class JsonImageClaim:
    """The checked parts of a JSON image claim; ``ref`` None when a key is wrong (GR101 raised)."""

    ref: RegionRef | None
    text: str | None
    quote: str | None
    field: str | None
    sha256: str | None
    value_spans: tuple[tuple[str, Span], ...]


def parse_json_image_claim(claim: dict[str, Any], ptr: str, span_of: Callable[..., Span],
                           malformed: Callable[..., None]) -> JsonImageClaim:
    """SPEC §15: exactly the nine keys of :data:`IMAGE_CLAIM_KEYS` with strict JSON types;
    ``region`` is ``"rN"``, ``support_type`` is ``"measured"``, ``id`` agrees with ``doc_id``,
    ``version`` and ``region``. Each problem is reported through ``malformed(span, message,
    hint)`` (GR101).
    """
    keys = ", ".join(IMAGE_CLAIM_KEYS)
    obj_span = span_of(ptr)
    ok = True
    for key in sorted(set(claim) - set(IMAGE_CLAIM_KEYS)):
        hint = ("An image claim cites a region, not a line: drop 'line'." if key == "line"
                else "An image claim has exactly: " + keys)
        malformed(span_of(f"{ptr}/{key.replace('~', '~0').replace('/', '~1')}", key=True),
                  f"unknown image claim key {key!r}", hint)
        ok = False
    for key in IMAGE_CLAIM_KEYS:
        if key not in claim:
            malformed(obj_span, f"the image claim has no {key!r}", "An image claim has exactly: " + keys)
            ok = False
            continue
        value = claim[key]
        vspan = span_of(f"{ptr}/{key}")
        if key == "version":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                malformed(vspan, f"version must be a positive integer, got {shorten(repr(value))}")
                ok = False
        elif key == "sha256":
            if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{64}", value):
                malformed(vspan, "sha256 must be 64 lowercase hex digits (the full hash)")
                ok = False
        elif key == "region":
            if not isinstance(value, str) or not re.fullmatch(rf"r{_NUMBER}", value):
                malformed(vspan, f"region must be \"r\" and a positive integer, like \"r1\", got"
                          f" {shorten(repr(value))}")
                ok = False
        elif key == "support_type":
            if value != SUPPORT_TYPE:
                malformed(vspan, f"support_type of an image claim is \"measured\", got {shorten(repr(value))}",
                          'Set support_type to "measured" (SPEC §12).')
                ok = False
        elif not isinstance(value, str) or not value:
            malformed(vspan, f"{key} must be non-empty text")
            ok = False
    value_spans = tuple((key, span_of(f"{ptr}/{key}")) for key in IMAGE_CLAIM_KEYS if key in claim)
    ref = None
    if ok:
        ref = checked_claim_id(claim, parse_region_id, lambda r: (r.doc_id, r.version, r.name),
                               ("doc_id", "version", "region"),
                               f"{claim['doc_id']}@{claim['version']}#{claim['region']}", span_of(f"{ptr}/id"),
                               malformed)
    if ref is None:
        return JsonImageClaim(None, None, None, None, None, value_spans)
    return JsonImageClaim(ref, claim["text"], claim["quote"], claim["field"], claim["sha256"], value_spans)


# ---------------------------------------------------------------------------- checks


@dataclass
class RegionResult:
    """What the check of one image claim found (SPEC §12).

    ``field``/``value`` are the measured attribute the quote names (None when it names none
    that is measured); ``subject`` is the conflict-key subject ``SUBJECT#rN``; ``line`` the
    attribute's line number in the version (:func:`grounding_core.images.attribute_line_number`:
    the identity of SPEC §15, ``(doc_id, version, region, field)``); ``line_text`` the
    attribute as a line, ``FIELD：VALUE``. ``supported`` is P, ``valid`` is P and V.
    """

    record: VersionRecord | None = None
    region: Region | None = None
    field: str | None = None
    value: str | None = None
    subject: str | None = None
    line: int | None = None
    line_text: str | None = None
    supported: bool = False
    valid: bool = False


VisibleLine = Callable[[str, int, int, str], bool]
"""SPEC §6 membership ``(doc_id, version, 1-based line, line text)`` of the context X (the
image's attribute line); None: visibility not checked."""


def split_quote(quote: str, separators: tuple[str, ...]) -> tuple[str, str] | None:
    """``FIELD：VALUE`` -> (field, value), stripped; the earliest separator wins (the
    full-width colon or a configured one). None without a separator or with an empty field.
    """
    best: tuple[int, str] | None = None
    for sep in (ATTRIBUTE_SEPARATOR, *separators):
        at = quote.find(sep)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, sep)
    if best is None:
        return None
    field = quote[:best[0]].strip()
    return (field, quote[best[0] + len(best[1]):].strip()) if field else None


COLON_LOOKALIKES = {":": "the ASCII ':'", "︰": "'︰' (U+FE30)", "∶": "'∶' (U+2236, ratio)",
                    "﹕": "'﹕' (U+FE55, small colon)", "꞉": "'꞉' (U+A789)"}
"""Characters a writer types for the full-width colon of ``FIELD：VALUE`` (IME or keyboard slips)."""


def _colon_slip(quote: str) -> tuple[str, str] | None:
    """``(what was typed, the quote with it replaced by '：')`` when a colon look-alike stands
    where the full-width colon of a measured attribute belongs (its first one), else None.
    """
    at = min((i for i in (quote.find(c) for c in COLON_LOOKALIKES) if i > 0), default=-1)
    if at < 0 or not quote[:at].strip():
        return None
    return COLON_LOOKALIKES[quote[at]], quote[:at] + "：" + quote[at + 1:]


def measured_value(snapshot: IndexSnapshot, sha256: str, region: str, field: str,
                   language: str) -> str | None:
    """The measured value of ``field`` of ``region`` (``"r1"``) in the content ``sha256``, or None."""
    measurement = snapshot.measurement(sha256)
    found = measurement.in_language(language).region(region) if measurement is not None else None
    return found.value(field) if found is not None else None


def _unindexed_png(config: Config, doc_id: str) -> str | None:
    """The evidence path ``DOC_ID.png`` (the default doc_id's file, SPEC §12) when it exists
    though the index has no such doc_id, else None. Looks only at that one name inside the
    evidence folder (``lexists``: nothing is opened or followed), on the error path only.
    """
    parts = doc_id.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    rel = f"{doc_id}.png"
    try:
        present = os.path.lexists(config.evidence_root.joinpath(*parts[:-1], parts[-1] + ".png"))
    except (OSError, ValueError):
        return None
    return rel if present and config.evidence_matches(rel) else None


def check_region_claim(
    claim: Any,
    snapshot: IndexSnapshot,
    config: Config,
    today: dt.date,
    visible: VisibleLine | None,
    findings: list[Finding],
) -> RegionResult:
    """SPEC §12 P and V of one image claim (``claim.region`` set); findings are appended.

    ``visible`` is None when the draft declares no context (visibility is not checked).
    """
    ref: RegionRef = claim.region
    cid = ref.id
    span: Span = claim.citation_span
    is_json = claim.json_text is not None
    language = config.image_language
    result = RegionResult()

    def add(name: str, message: str, hint: str = "", at: str | None = None, fix: Edit | None = None,
            related: tuple[Location, ...] = ()) -> None:
        where = claim.value_span(at) if is_json and at is not None else span
        findings.append(Finding(name, where, message, hint=hint, citation=cid, fix=fix, related=related))

    versions = snapshot.versions(ref.doc_id)
    if not versions:
        unindexed = _unindexed_png(config, ref.doc_id)
        if unindexed is not None:
            add("unknown-source", f"no evidence document has doc_id '{ref.doc_id}': the image {unindexed}"
                " is in the evidence folder but is not indexed (it does not decode, or its sidecar is"
                " bad; its own finding says which)",
                hint=f"Fix {unindexed} as its finding says, or cite another source.", at="doc_id")
            return result
        close = snapshot.similar_doc_ids(ref.doc_id)
        add("unknown-source", f"no evidence document has doc_id '{ref.doc_id}'",
            hint=f"Did you mean '{close[0]}'?" if close else "Check the doc_id against the evidence folder.",
            at="doc_id")
        return result
    newest = max(versions)
    if ref.version > newest:
        add("unknown-source", f"'{ref.doc_id}' has no version {ref.version}; the newest is {newest}",
            hint=f"Cite {ref.doc_id}@{newest}{'#' + ref.name}.", at="version")
        return result
    record = versions.get(ref.version)
    current = versions[newest]
    if not is_image_path((record or current).path):
        add("unknown-source", f"{ref.doc_id}@{ref.version} is a text document, not an image: it has"
            " lines, not regions", hint=f"Cite a line as {ref.doc_id}@{ref.version}:LINE.", at="region")
        return result
    current_measurement = snapshot.measurement(current.sha256)
    quoted = split_quote(claim.quote or "", config.field_separators)
    supported = True
    if ref.version < newest:
        supported = False
        inactive = snapshot.inactive_reason(current, today)
        change = _change(snapshot, record, current, ref.name, quoted, language)
        fix = None
        if (not inactive and not is_json and quoted is not None and current_measurement is not None
                and claim.hash_prefix is not None):
            now = measured_value(snapshot, current.sha256, ref.name, quoted[0], language)
            if now is not None and now == quoted[1]:
                fix = _anchor_edit(claim, current, ref.name, claim.quote or "")
        add("stale-citation",
            f"{cid} cites version {ref.version}, but version {newest} of '{ref.doc_id}' is current"
            + (f"; {change}" if change else ""),
            hint=(f"Version {newest} is not active either ({inactive}); cite another active source."
                  if inactive else f"Re-anchor to {ref.doc_id}@{newest}#{ref.name}, where the"
                  " measurement is the same." if fix else
                  f"Re-read the image and cite {ref.doc_id}@{newest} with what it measures now."),
            fix=fix, related=(_location(config, current, ref.name, current_measurement, language),))
        if record is None:
            return result  # older content never indexed: hash and quote are not checked
    assert record is not None
    if ref.version == newest:
        reason = snapshot.inactive_reason(record, today)
        if reason is not None:
            supported = False
            add("inactive-source", f"{ref.doc_id}@{ref.version} is not active: {reason}",
                hint="Cite an active source instead; revoked, deleted, expired and not-yet-effective"
                " documents never support an answer.")
    stored = snapshot.measurement(record.sha256)
    if stored is None:
        add("unknown-source", f"the index holds no measurement of {ref.doc_id}@{ref.version} (sha256"
            f" {record.sha256[:12]}): it was measured by another version of Grounding",
            hint="Run `grounding index` (or save the image) to measure it again.")
        return result
    measurement = stored.in_language(language)
    result.record = record
    region = measurement.region(ref.name)
    if region is None:
        count = len(measurement.regions)
        have = f"r1 to r{count}" if count > 1 else ("only r1" if count == 1 else "none")
        add("unknown-source", f"{ref.doc_id}@{ref.version} has {count} measured region(s) ({have});"
            f" there is no {ref.name}", hint="Check the region number (hover an image citation to see"
            " its regions, or use completion).", at="region")
        return result
    result.region = region
    result.subject = f"{record.subject or record.doc_id}#{ref.name}"
    location = _location(config, record, ref.name, measurement, language)
    hex_text = claim.hash_prefix or ""
    if not record.sha256.startswith(hex_text) or (claim.json_sha256 is not None and record.sha256 != hex_text):
        supported = False
        older = next((old for old in record.previous_shas if old.startswith(hex_text)), None)
        then = (measured_value(snapshot, older, ref.name, quoted[0], language)
                if older is not None and quoted is not None else None)
        now = region.value(quoted[0]) if quoted is not None else None
        change = (f"; its {quoted[0]} was measured {then} there and is {now} now"
                  if quoted is not None and then is not None and now is not None and then != now else "")
        add("hash-mismatch",
            f"sha256:{hex_text[:12]} is not the hash of {ref.doc_id}@{ref.version}"
            + (" (it is the hash of older content of this same version: the image was saved again"
               f"{change})" if older else "")
            + f"; the current hash starts {record.sha256[:12]}",
            hint="Re-read the region and re-cite it with the current hash." if older else
            f"Use sha256:{record.sha256[:12]}.", at="sha256", related=(location,))
    quote = claim.quote or ""
    fields = measured_fields(language)
    if quoted is None:
        supported = False
        slip = _colon_slip(quote)
        if slip is not None:
            char, fixed = slip
            add("quote-mismatch", f"the quote {shorten(quote, quote=True)} separates field and value with"
                f" {char}; a measured attribute is written with the full-width colon '：'",
                hint=f"Quote \"{shorten(fixed, 60)}\".", at="quote", related=(location,))
        else:
            add("quote-mismatch", f"the quote {shorten(quote, quote=True)} is not one measured attribute"
                " written FIELD：VALUE", hint=f"Quote one of {ref.name}'s attributes, e.g. "
                f"\"{region.attributes[2][0]}：{region.attributes[2][1]}\".", at="quote", related=(location,))
    elif quoted[0] not in fields:
        supported = False
        add("unsupported-attribute",
            f"'{shorten(quoted[0], 40)}' is not measured: an image claim can state only"
            f" {', '.join(fields)} of a region (SPEC §12); material, weight, purpose or safety are"
            " never measured, however the image looks",
            hint="Remove this claim, or support it with a text source that states it.", at="quote",
            related=(location,))
    else:
        field_name, stated = quoted
        actual = region.value(field_name)
        assert actual is not None
        result.field, result.value = field_name, actual
        result.line = attribute_line_number(region.number, fields.index(field_name))
        result.line_text = f"{field_name}{ATTRIBUTE_SEPARATOR}{actual}"
        if quote != result.line_text:
            supported = False
            if stated == actual:
                message = (f"the quote {shorten(quote, quote=True)} is not written as the index writes it:"
                           f" {result.line_text!r}")
            else:
                message = (f"{ref.id} measures {field_name} {actual!r}, not {stated!r}"
                           f" ({field_name} of {ref.name} in sha256 {record.sha256[:12]})")
            add("quote-mismatch", message, hint=f"Quote \"{result.line_text}\" or cite another region.",
                at="quote", related=(location,),
                fix=_anchor_edit(claim, record, ref.name, result.line_text, claim.hash_prefix)
                if stated == actual and not is_json else None)
    if is_json:
        if claim.json_text != quote:
            supported = False
            add("quote-mismatch", "text of an image claim is its quote (FIELD：VALUE)",
                hint=f"Set text to {quote!r}.", at="text")
        expected_field = quoted[0] if quoted is not None else None
        if claim.json_field != expected_field:
            supported = False
            add("quote-mismatch",
                f"field {claim.json_field!r} is not the text before the separator of the quote"
                + (f" ({expected_field!r})" if expected_field else ""),
                hint=f"Set field to {expected_field!r}." if expected_field else "Quote FIELD：VALUE.",
                at="field")
    result.supported = supported
    if not supported:
        return result
    assert result.line is not None and result.line_text is not None
    if visible is not None and not visible(ref.doc_id, ref.version, result.line, result.line_text):
        first = attribute_line_number(ref.region, 0)
        add("invisible-source",
            f"{cid} is supported by the image but was not in the declared context",
            hint=f"Add \"{ref.doc_id}@{ref.version}\" (the whole image) or \"{ref.doc_id}@{ref.version}:"
            f"{first}-{first + 4}\" ({ref.name}'s attribute lines) to the context the answer was written from.")
        return result
    result.valid = True
    return result


def _change(snapshot: IndexSnapshot, record: VersionRecord | None, current: VersionRecord, region: str,
            quoted: tuple[str, str] | None, language: str) -> str:
    """``颜色 of r1 was 红色 at version 1 and is 蓝色 at version 2`` (or that r1 is gone)."""
    if quoted is None:
        return ""
    field_name = quoted[0]
    if field_name not in measured_fields(language):
        return ""
    now_measurement = snapshot.measurement(current.sha256)
    if now_measurement is not None and now_measurement.region(region) is None:
        return f"{region} no longer exists in version {current.version}"
    then = measured_value(snapshot, record.sha256, region, field_name, language) if record else None
    now = measured_value(snapshot, current.sha256, region, field_name, language)
    if now is None:
        return ""
    if then is None:
        return f"{field_name} of {region} is {now} at version {current.version}"
    if then == now:
        return f"{field_name} of {region} is still {now} at version {current.version}"
    return f"{field_name} of {region} was {then} at version {record.version if record else '?'} and is" \
           f" {now} at version {current.version}"


def _location(config: Config, record: VersionRecord, region: str, measurement: Measurement | None,
              language: str) -> Location:
    found = measurement.in_language(language).region(region) if measurement is not None else None
    text = ", ".join(f"{k}：{v}" for k, v in found.attributes) if found is not None else ""
    return Location(config.evidence_display(record.path), 1, f"{record.doc_id}@{record.version}#{region}"
                    + (f" {text}" if text else ""))


def _anchor_edit(claim: Any, record: VersionRecord, region: str, quote: str,
                 hash_prefix: str | None = None) -> Edit:
    new_id = f"{record.doc_id}@{record.version}#{region}"
    new_hash = hash_prefix if hash_prefix and record.sha256.startswith(hash_prefix) else record.sha256[:12]
    return Edit(claim.citation_span, f'{new_id} sha256:{new_hash} "{quote}"', f"Re-anchor to {new_id}")


def wire_claim(result: RegionResult, ref: RegionRef) -> dict[str, object]:
    """A valid image claim in the nine-key shape of SPEC §15, keys in order."""
    assert result.record is not None and result.line_text is not None
    return {
        "text": result.line_text, "quote": result.line_text, "id": ref.id, "doc_id": ref.doc_id,
        "version": ref.version, "region": ref.name, "sha256": result.record.sha256,
        "field": result.field or "", "support_type": SUPPORT_TYPE,
    }


def citation_line(record: VersionRecord, region: Region, field: str, label: str = "1",
                  hash_digits: int = 12) -> str:
    """A paste-ready verified definition ``[^1]: shapes@1#r2 sha256:HEX "颜色：绿色"``."""
    value = region.value(field)
    if value is None:
        raise ValueError(f"{field!r} is not a measured field of {region.name}")
    return (f'[^{label}]: {record.doc_id}@{record.version}#{region.name} sha256:{record.sha256[:hash_digits]}'
            f' "{field}{ATTRIBUTE_SEPARATOR}{value}"')


__all__ = ["ATTRIBUTE_SEPARATOR", "SUPPORT_TYPE", "JsonImageClaim", "RegionResult", "check_region_claim",
           "citation_line", "definition_shape", "is_json_image_claim", "is_region_id", "measured_value",
           "parse_json_image_claim", "parse_region_id", "split_quote", "wire_claim"]
