"""Token counts as vLLM's argument parser reads them (``--max-model-len 32K``): the suffixes and the plain-int rule.
Re-exported by ``kvledger.units``, which every flag parser imports."""

from __future__ import annotations

import re
from fractions import Fraction

from kvledger.errors import InputError

__all__ = ["TOKEN_SUFFIXES", "T_SUFFIX_FROM", "AUTO_MAX_MODEL_LEN_FROM", "AUTO_MAX_MODEL_LEN", "parse_tokens",
           "parse_max_model_len", "token_suffix_note"]

#: the suffixes of a token count, as vLLM reads ``--max-model-len`` (from 0.8.4) and ``--max-num-batched-tokens``
#: (from 0.9.1): ``human_readable_int`` (vllm/engine/arg_utils.py; vllm/utils/argparse_utils.py in later releases) —
#: lowercase decimal, uppercase binary (t and T from the releases that added them; the older refuse both)
TOKEN_SUFFIXES = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SUFFIXED = re.compile(r"^\s*(\d+(?:\.\d+)?)([kmgtKMGT])\s*$")
#: first vLLM release whose ``human_readable_int`` reads t and T: 0.13.0 (``engine/arg_utils.py``; 0.10.1, 0.11.0 and
#: 0.12.0 match them in the regex but have no multiplier for them, so fall through to ``int(value)``, which raises)
T_SUFFIX_FROM = (0, 13, 0)
#: first vLLM release whose --max-model-len takes -1 or "auto" (``human_readable_int_or_auto``, engine/arg_utils.py of
#: 0.14.0, 0.16.0 and 0.19.0; absent in 0.13.0): the model's length, lowered at start-up to the longest that one
#: request's KV fits in the memory left for the KV cache (v1/core/kv_cache_utils.py ``_auto_fit_max_model_len``)
AUTO_MAX_MODEL_LEN_FROM = (0, 14, 0)
AUTO_MAX_MODEL_LEN = -1
"""What ``parse_max_model_len`` returns for -1 or "auto", as vLLM's ``human_readable_int_or_auto`` does."""


def parse_tokens(text: str | int, *, what: str = "tokens", vllm_version: tuple[int, int, int] | None = None) -> int:
    """Parse a token count as vLLM reads one (:data:`TOKEN_SUFFIXES`): ``"8192"``, ``"8_192"``, ``"8K"`` (= 8,192),
    ``"8k"`` (= 8,000), ``"1M"`` (= 1,048,576), ``"1.5k"`` (= 1,500). Every token flag reads it, the engine's
    (``--max-model-len``, ``--max-num-batched-tokens``) and kvledger's own (``--context``, ``--window`` …): one
    vocabulary. As vLLM, a count without a suffix must read as a Python int ("32768.0" and "1e4" are refused:
    ``_plain_int``) and a decimal before an uppercase suffix is refused ("1.5K"); unlike vLLM, which drops the
    fraction, so is a suffixed count that is not whole ("1.0005k"), or one vLLM's float product reads as another
    whole number ("1.005k": ``_check_float_reading``). ``vllm_version``: the vLLM release that reads the
    flag, where the caller knows it: t and T are refused before ``T_SUFFIX_FROM`` with that release's words; None (not
    vLLM, or no version given: the newest modelled, which reads them) accepts every suffix.

    Raises:
        InputError: unparseable, fractional or non-positive counts, or a suffix vLLM does not read (b, B).
    """
    m = _SUFFIXED.match(text) if isinstance(text, str) else None
    if m is not None:
        number, suffix = m.groups()
        if suffix in "tT" and vllm_version is not None and vllm_version < T_SUFFIX_FROM:
            raise InputError(_no_t_words(text.strip(), what, vllm_version))
        if suffix.isupper() and "." in number:
            raise InputError(f"{what}: {text!r}: vLLM refuses a decimal with a binary suffix ({suffix} = "
                             f"{TOKEN_SUFFIXES[suffix]:,}); write {number}{suffix.lower()} ({suffix.lower()} = "
                             f"{TOKEN_SUFFIXES[suffix.lower()]:,}) or a whole number of {suffix}")
        value = Fraction(number) * TOKEN_SUFFIXES[suffix]
        _check_float_reading(text.strip(), number, suffix, value, what)
    elif isinstance(text, int) and not isinstance(text, bool):
        value = Fraction(text)
    else:
        value = _plain_int(str(text), what)
    if value < 1 or value.denominator != 1:
        raise InputError(f"{what}: {text!r} must be a whole, positive number of tokens")
    return int(value)


def _check_float_reading(text: str, number: str, suffix: str, value: Fraction, what: str) -> None:
    """Refuse a whole decimal count that vLLM reads as another number: ``human_readable_int`` (engine/arg_utils.py of
    0.10.1–0.19.0, utils/argparse_utils.py of 0.26.0–0.34.0) returns ``int(float(number) * mult)`` for a lowercase
    suffix, so a binary-float product just below the whole value truncates ("1.005k" → 1004.9999999999999 → 1,004;
    "8.2m" → 8,199,999)."""
    if "." not in number or value.denominator != 1:
        return
    read = int(float(number) * TOKEN_SUFFIXES[suffix])
    if read != value:
        raise InputError(f"{what}: {text!r}: vLLM reads it as {read:,}, not {int(value):,} (its human_readable_int "
                         f"takes int(float({number!r}) * {TOKEN_SUFFIXES[suffix]:,}), and the float product falls "
                         f"just short); write {int(value)} (or {read} for vLLM's reading)")


def _release(ver: tuple[int, int, int]) -> str:
    return ".".join(map(str, ver))


def _no_t_words(text: str, what: str, ver: tuple[int, int, int]) -> str:
    return (f"{what}: {text!r}: vLLM {_release(ver)} refuses it (`vllm serve` exits with \"invalid human_readable_int "
            f"value: {text!r}\"): its suffixes are k m g and K M G; t and T (10^12, 2^40) are read from "
            f"{_release(T_SUFFIX_FROM)}")


def parse_max_model_len(text: str | int, *, what: str = "--max-model-len",
                        vllm_version: tuple[int, int, int] | None = None) -> int:
    """--max-model-len as the vLLM release ``vllm_version`` reads it: ``parse_tokens``, and from
    ``AUTO_MAX_MODEL_LEN_FROM`` (or with no release given: the newest modelled) -1 or "auto", returned as
    ``AUTO_MAX_MODEL_LEN``. Before 0.14.0 "auto" makes argparse exit ("invalid human_readable_int value: 'auto'") and
    -1 reads as a length of -1, which no request fits: both refused, with the release that reads them.

    Raises:
        InputError: as ``parse_tokens``; -1 or auto before 0.14.0.
    """
    word = str(text).strip()
    if word == "-1" or word.lower() == "auto" or text == -1:
        if vllm_version is None or vllm_version >= AUTO_MAX_MODEL_LEN_FROM:
            return AUTO_MAX_MODEL_LEN
        said = (f"`vllm serve` exits with \"invalid human_readable_int value: {word!r}\"" if word.lower() == "auto"
                else _minus_one_words(vllm_version))
        raise InputError(f"{what} {word}: vLLM {_release(vllm_version)} has no auto-fit ({said}); -1 and auto (the "
                         "longest length whose one request fits the KV memory, at most the model's) are read from "
                         f"{_release(AUTO_MAX_MODEL_LEN_FROM)}: give a length, or --engine-version "
                         f"{_release(AUTO_MAX_MODEL_LEN_FROM)} or later")
    return parse_tokens(text, what=what, vllm_version=vllm_version)


def _minus_one_words(ver: tuple[int, int, int]) -> str:
    """What a release before 0.14 does with --max-model-len -1: 0.13.0's ModelConfig declares ``max_model_len:
    int = Field(default=None, gt=0)`` (config/model.py), so pydantic refuses it at start-up; 0.10.1–0.12.0 declare it
    ``SkipValidation[int]`` and ``_get_and_verify_max_len`` returns -1 as given."""
    if ver >= (0, 13, 0):
        return "its ModelConfig refuses it at start-up (max_model_len must be greater than 0)"
    return "it reads -1 as a length of -1 tokens, which no request fits"


def _plain_int(text: str, what: str) -> Fraction:
    """A count with no suffix, read as vLLM reads one: ``int(value.strip())`` (vllm/engine/arg_utils.py
    ``human_readable_int``, 0.10.1 and 0.19.0, the type of --max-model-len and --max-num-batched-tokens): digits with
    an optional sign and '_' between digits; "32768.0" or "1e4" make argparse exit ("invalid human_readable_int
    value")."""
    try:
        return Fraction(int(text.strip()))
    except ValueError:
        pass
    if re.search(r"[A-Za-z]\s*$", text) and not re.search(r"[eE][-+]?\d+\s*$", text):  # an unknown suffix
        raise InputError(f"{what}: cannot read {text!r} as a token count; write e.g. 8192, 8K (= 8,192) or 8k "
                         "(= 8,000): vLLM's suffixes, k m g t powers of 1,000 and K M G T powers of 1,024")
    raise InputError(f"{what}: {text!r}: vLLM refuses it (`vllm serve` exits with \"invalid human_readable_int value: "
                     f"{text.strip()!r}\"): a count without a suffix is read as a Python int, digits only, so no "
                     "decimal point or exponent; write e.g. 32768, 32k (= 32,000) or 32K (= 32,768)")


def token_suffix_note(text: str, *, what: str) -> str | None:
    """The note a token count with a lowercase suffix earns ("--max-model-len 8k = 8,000 tokens …"), so that nobody
    reads 8k as 8,192; None for any other text, or one :func:`parse_tokens` refuses (its error says why)."""
    m = _SUFFIXED.match(text)
    if m is None or not m.group(2).islower():
        return None
    try:
        n = parse_tokens(text, what=what)
    except InputError:
        return None
    low = m.group(2)
    return (f"{what} {text.strip()} = {n:,} tokens (vLLM's rule: {low} = {TOKEN_SUFFIXES[low]:,}, {low.upper()} = "
            f"{TOKEN_SUFFIXES[low.upper()]:,})")
