"""Each engine's ``--kv-cache-dtype`` choices, release by release, and the check of a value against them: the one
place that decides which ``--kv-cache-dtype`` values kvledger and each engine release take (``kvcache`` sizes the
elements with ``KV_DTYPE_BYTES`` from here).

kvledger's own names (``KV_DTYPE_BYTES``) include 16-bit aliases (bf16, fp16, half) and vLLM's fp8 names;
the engines' argument parsers take only their own lists, and refuse anything else before start-up:

- vLLM: ``CacheDType`` (``vllm/config.py`` to 0.10, ``vllm/config/cache.py`` from 0.10.2), a Literal argparse turns
  into choices, checked as written (case and all), by release (``_VLLM``): 0.9.0 and 0.9.2 auto and the three fp8
  names; 0.10.0 and 0.10.2 add fp8_inc; 0.11.0 bfloat16; 0.12.0–0.17.0 fp8_ds_mla; 0.18.0 and 0.19.0 float16 (0.19's
  list, ``VLLM_019_CACHE_DTYPES``); 0.33 14 more. A release between those read takes the list of the last
  one read before it, a release before 0.9.0 0.9.0's.
- SGLang: ``--kv-cache-dtype`` ``choices`` (``srt/server_args.py`` to 0.5.20; ``srt/arg_groups/fields/model.py`` from
  0.5.21), read in the wheels of 0.4.0, 0.4.1, 0.4.1.post1–post7, 0.4.2, 0.4.3, 0.4.6, 0.4.9, 0.5.1, 0.5.3,
  0.5.3.post1, 0.5.3.post3, 0.5.4, 0.5.4.post1–post3, 0.5.5, 0.5.6, 0.5.8, 0.5.9, 0.5.10, 0.5.12, 0.5.14, 0.5.15,
  0.5.15.post1, 0.5.16, 0.5.17, 0.5.20, 0.5.21, 0.5.22 and 0.5.23 (``_SGLANG``: each list from the first release that
  has it). None has fp8_inc, fp16, float16, half or vLLM's bare fp8. SGLang's refusal is argparse's (Python 3.11,
  the interpreter its wheels are built for): ``argument --kv-cache-dtype: invalid choice: 'X' (choose from 'auto',
  …)``.
"""

from __future__ import annotations

from kvledger.errors import InputError

__all__ = ["KV_DTYPE_BYTES", "KV_DTYPE_NAMES", "VLLM_019_CACHE_DTYPES", "VLLM_033_CACHE_DTYPES", "VLLM_SPELLING",
           "vllm_spelling_fix", "vllm_cache_dtypes", "sglang_cache_dtypes", "engine_kv_dtypes",
           "check_kv_dtype_for_engine", "check_kv_dtype_case"]

KV_DTYPE_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2,
                  "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1}
"""kvledger's ``--kv-cache-dtype`` names besides auto, with the bytes per KV element of each; every fp8 variant is
stored as uint8 (vLLM ``STR_DTYPE_TO_TORCH_DTYPE``)."""
KV_DTYPE_NAMES = ", ".join(["auto", *KV_DTYPE_BYTES])
"""The ``--kv-cache-dtype`` values every command accepts, as its refusal lists them."""
VLLM_019_CACHE_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
"""vLLM 0.19's ``--kv-cache-dtype`` choices (``vllm/config/cache.py`` ``CacheDType``, a Literal argparse checks as
written, case and all)."""
VLLM_SPELLING = {"bf16": "bfloat16", "fp16": "float16", "half": "float16"}
"""The name vLLM's ``CacheDType`` (0.19 and 0.33, ``vllm/config/cache.py``) has for each kvledger alias it lacks."""

VLLM_033_CACHE_DTYPES = (*VLLM_019_CACHE_DTYPES, "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc",
                         "turboquant_k3v4_nc", "turboquant_3bit_nc", "octave_k3v4", "octave_k3v3",
                         "octave_k3v3_compact", "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head",
                         "fp8_per_token_head", "nvfp4", "nvfp4_4over6")
"""vLLM 0.33's ``CacheDType`` (``vllm/config/cache.py``): 0.19's and 14 more."""
_SGLANG_NEWEST = "0.5.23"  # sglang_rules.SGLANG_LATEST, the release a plan without --engine-version follows

_E5, _E4, _BF = ("auto", "fp8_e5m2"), ("fp8_e4m3",), ("bf16", "bfloat16")
_SGLANG: tuple[tuple[tuple[int, ...], tuple[str, ...], str], ...] = (
    ((0, 4, 0), _E5, "server_args.py, read in 0.4.0–0.4.1.post5"),
    ((0, 4, 1, 6), (*_E5, *_E4), "server_args.py, read in 0.4.1.post6–0.5.3.post3"),
    ((0, 5, 4), (*_E5, *_E4, *_BF), "server_args.py, read in 0.5.4–0.5.4.post2"),
    ((0, 5, 4, 3), (*_E5, *_E4, *_BF, "fp4_e2m1"), "server_args.py, read in 0.5.4.post3–0.5.15.post1"),
    ((0, 5, 16), (*_E5, *_E4, "mxfp8", *_BF, "nvfp4", "fp4_mx_block16", "fp4_e2m1"),
     "server_args.py (arg_groups/fields/model.py from 0.5.20), read in 0.5.16–0.5.20"),
    ((0, 5, 21), (*_E5, *_E4, "mxfp8", *_BF, "nvfp4", "fp4_mx_block16"),
     "arg_groups/fields/model.py, read in 0.5.21–0.5.23"),
)
"""(first release, SGLang's ``--kv-cache-dtype`` choices in its order, where they were read). 0.4.1.post6 added
fp8_e4m3 (post5 lacks it), 0.5.4 bf16/bfloat16, 0.5.4.post3 fp4_e2m1 (post2 lacks it), 0.5.16 mxfp8, nvfp4 and
fp4_mx_block16 (0.5.15.post1 lacks them); 0.5.21 dropped fp4_e2m1."""


_V9 = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
_VLLM: tuple[tuple[tuple[int, int, int], tuple[str, ...], str], ...] = (
    ((0, 0, 0), _V9, "vllm/config.py, read in 0.9.0 and 0.9.2"),
    ((0, 10, 0), (*_V9, "fp8_inc"), "vllm/config.py, read in 0.10.0; vllm/config/cache.py in 0.10.2"),
    ((0, 11, 0), ("auto", "bfloat16", *_V9[1:], "fp8_inc"), "vllm/config/cache.py, read in 0.11.0"),
    ((0, 12, 0), ("auto", "bfloat16", *_V9[1:], "fp8_inc", "fp8_ds_mla"),
     "vllm/config/cache.py, read in 0.12.0–0.17.0"),
    ((0, 18, 0), VLLM_019_CACHE_DTYPES, "vllm/config/cache.py, read in 0.18.0 and 0.19.0"),
    ((0, 33, 0), VLLM_033_CACHE_DTYPES, "vllm/config/cache.py, read in 0.33"),
)
"""(first release, vLLM's ``CacheDType`` in its order, the releases it was read in): module doc."""


def vllm_spelling_fix(d: str) -> str:
    """What to write instead of the lower-cased ``d`` vLLM refused: its own name, and ``auto`` for a 16-bit alias."""
    return repr(VLLM_SPELLING.get(d, d)) + (" (or 'auto' for the model's own dtype)" if d in VLLM_SPELLING else "")


def _known(d: str) -> bool:
    """Whether the lower-cased ``d`` is one of kvledger's names (auto or ``KV_DTYPE_BYTES``)."""
    return d == "auto" or d in KV_DTYPE_BYTES


def check_kv_dtype_case(kv_cache_dtype: str) -> str:
    """``kv_cache_dtype`` lower-cased, refused when it is a known name written in another case ("FP8"), whatever the
    engine: vLLM's and SGLang's argparse check their choices as written (each engine's own refusal, with the release's
    choices, is ``check_kv_dtype_for_engine``, which the commands run first); TensorRT-LLM's names are lower case too.

    Raises:
        InputError: a known name not in lower case, with the name to write.
    """
    d = kv_cache_dtype.lower()
    if d != kv_cache_dtype and _known(d):
        raise InputError(f"--kv-cache-dtype {kv_cache_dtype!r}: the engines' KV cache dtype names are lower case "
                         f"(vLLM's and SGLang's argument parsing refuse any other case); write {d!r}")
    return d


def vllm_cache_dtypes(engine_version: str | None) -> tuple[tuple[str, ...], str]:
    """(vLLM's ``--kv-cache-dtype`` choices, the releases they were read in) for ``engine_version``: the list of the
    newest row of ``_VLLM`` at or before it (no version, or one that does not parse: the newest read)."""
    from kvledger.accounting.vllm_rules import LATEST, version_tuple

    ver = version_tuple(engine_version or LATEST) or version_tuple(LATEST)
    _, choices, read = next(row for row in reversed(_VLLM) if ver >= row[0])
    return choices, read


def sglang_cache_dtypes(engine_version: str | None) -> tuple[tuple[str, ...], str]:
    """(SGLang's ``--kv-cache-dtype`` choices for the release, where they were read): the newest list at or before
    it (a release past 0.5.23: 0.5.23's). No version: 0.5.23's.

    Raises:
        InputError: not an SGLang version, or one before 0.4.0 or past the next minor (``parse_sglang_version``).
    """
    from kvledger.accounting.sglang_rules import SGLANG_LATEST, parse_sglang_version

    ver = parse_sglang_version(engine_version) if engine_version else SGLANG_LATEST
    _, choices, where = next(row for row in reversed(_SGLANG) if ver >= row[0])
    return choices, where


def engine_kv_dtypes(engine: str, engine_version: str | None) -> list[str]:
    """kvledger's ``--kv-cache-dtype`` names ``engine`` takes at ``engine_version``: for vLLM and SGLang those in the
    release's choices, in kvledger's order; for TensorRT-LLM, whose choices were not read, all of kvledger's."""
    names = ["auto", *KV_DTYPE_BYTES]
    if engine == "vllm":
        return [d for d in names if d in vllm_cache_dtypes(engine_version)[0]]
    if engine == "sglang":
        return [d for d in names if d in sglang_cache_dtypes(engine_version)[0]]
    return names


def _sglang_fix(d: str, choices: tuple[str, ...]) -> str:
    """What to write instead of the lower-cased ``d`` that the SGLang release's ``choices`` lack as given."""
    if d in choices:  # a case slip: argparse compares as written
        return f"write {d!r}"
    if d in KV_DTYPE_BYTES and KV_DTYPE_BYTES[d] == 1:
        fp8 = "fp8_e4m3" if "fp8_e4m3" in choices else "fp8_e5m2"
        return f"write '{fp8}' for its 1-byte FP8 KV cache"
    return "write 'auto' for the model's own 16-bit dtype"


def check_kv_dtype_for_engine(values: str | list[str] | tuple[str, ...] | None, engine: str,
                              engine_version: str | None) -> None:
    """Refuse a ``--kv-cache-dtype`` value ``engine`` refuses at argument parsing: for vLLM a 16-bit alias (bf16,
    fp16, half, any case) or a known name not in lower case, with vLLM's name and the version's choices; for SGLang a
    kvledger name the release's choices lack (fp8_inc, fp16, float16, half; bf16 and bfloat16 before 0.5.4;
    fp8_e4m3 before 0.4.1.post6), in argparse's words, with SGLang's fix. kvledger's bare ``fp8`` stays (its SGLang
    plan notes the spelling to pass); other engines and unknown names are left to the plan's own check.

    Raises:
        InputError: the value and the engine's fix.
    """
    for given in [values] if isinstance(values, str) else values or ():
        d = given.lower()
        if engine == "vllm" and (d in VLLM_SPELLING or (d != given and _known(d))):
            choices, read = vllm_cache_dtypes(engine_version)
            fix = vllm_spelling_fix(d) if VLLM_SPELLING.get(d, d) in choices else "'auto'"
            raise InputError(f"--kv-cache-dtype {given!r}: vLLM refuses it at argument parsing (its choices are "
                             f"lower case: {', '.join(choices)}; CacheDType, {read}); write {fix}")
        if engine == "vllm" and d.strip() and not _known(d):  # "" is another check's (an empty list)
            _refuse_vllm_unknown(given, engine_version)
        if engine == "vllm" and d in KV_DTYPE_BYTES and d not in vllm_cache_dtypes(engine_version)[0]:
            _refuse_vllm_release(d, engine_version)
        if engine == "sglang" and _known(d) and given != "fp8":
            choices, where = sglang_cache_dtypes(engine_version)
            if given not in choices:
                listed = ", ".join(repr(c) for c in choices)
                ver = engine_version or _SGLANG_NEWEST
                raise InputError(f"--kv-cache-dtype {given!r}: SGLang {ver} refuses it at "
                                 f"argument parsing: \"argument --kv-cache-dtype: invalid choice: {given!r} (choose "
                                 f"from {listed})\" ({where}); {_sglang_fix(d, choices)}")


def _refuse_vllm_release(d: str, engine_version: str | None) -> None:
    """Refuse vLLM's own name ``d`` that ``engine_version``'s ``CacheDType`` lacks (float16 before 0.18, bfloat16
    before 0.11, fp8_inc before 0.10), with the release's choices and what to write instead.

    Raises:
        InputError: always.
    """
    choices, read = vllm_cache_dtypes(engine_version)
    fix = "'fp8' (1 B, as fp8_inc)" if KV_DTYPE_BYTES[d] == 1 else "'auto' for the model's own 16-bit dtype"
    raise InputError(f"--kv-cache-dtype {d!r}: vLLM {engine_version} refuses it at argument parsing, its choices "
                     f"being {', '.join(choices)} (CacheDType, {read}); write {fix}, or use a later "
                     "--engine-version")


def _refuse_vllm_unknown(given: str, engine_version: str | None) -> None:
    """Refuse a name kvledger does not plan, with vLLM's words for it: one the release's ``CacheDType`` lacks ("fp9")
    is refused at argument parsing; one it has (nvfp4) kvledger has no bytes for. Either way the names to use are
    those of the release's choices kvledger plans: the generic refusal listed kvledger's aliases too (bf16, fp16,
    half), which vLLM itself refuses (a new user's trial).

    Raises:
        InputError: always.
    """
    choices, read = vllm_cache_dtypes(engine_version)
    planned = ", ".join(c for c in choices if _known(c))
    what = ("vLLM takes it, but kvledger does not model its KV bytes" if given in choices else
            f"vLLM refuses it at argument parsing, its choices being {', '.join(choices)} (CacheDType, {read})")
    raise InputError(f"--kv-cache-dtype {given!r}: {what}; kvledger plans {planned}")
