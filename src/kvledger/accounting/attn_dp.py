"""SGLang's attention-DP flag: ``--attn-dp-size N`` from 0.5.22, ``--enable-dp-attention --dp-size N`` before; which
spelling a release takes (for the launch and check lines) and what ``--attn-dp-size`` given with the old flags means.

Read in SGLang's wheels: 0.5.20 and 0.5.21 have ``attn_dp_size`` only as a derived width (``arg_groups/fields/
parallel.py``: ``dp_size`` under DP attention, else 1), no flag; 0.5.22 adds the ``--attn-dp-size`` argument (alias
``--attention-data-parallel-size``, default 1: attention data-parallel groups inside the TP group, the FFN still TP)
and keeps ``--enable-dp-attention`` as a deprecated flag (``server_args.py``: ``DeprecatedStoreTrueAction``, removal
announced for after 2026-12-31). ``arg_groups/parallel_hook.py::handle_deprecated_dp_attention`` turns it into
``attn_dp_size = dp_size, dp_size = 1`` when ``attn_dp_size`` is 1, and drops it otherwise; ``--dp-size`` then counts
whole replicas, and ``handle_data_parallelism`` refuses ``dp_size > 1`` with ``attn_dp_size > 1``; ``tp_size %
attn_dp_size == 0`` is asserted (``parallel_hook.py``). 0.5.23 reads the same.
"""

from __future__ import annotations

from kvledger.accounting.sglang_rules import parse_sglang_version
from kvledger.errors import InputError

__all__ = ["ATTN_DP_SIZE_SINCE", "takes_attn_dp_size", "dp_attention_argv", "dp_attention_words",
           "resolve_attn_dp_size"]

ATTN_DP_SIZE_SINCE = (0, 5, 22)
"""The first SGLang release with ``--attn-dp-size`` (not in 0.5.20 or 0.5.21; in 0.5.22 and 0.5.23)."""


def takes_attn_dp_size(engine_version: str | None) -> bool:
    """Whether the SGLang release (None: the newest read, 0.5.23) takes ``--attn-dp-size``."""
    return engine_version is None or parse_sglang_version(engine_version) >= ATTN_DP_SIZE_SINCE


def dp_attention_argv(dp: int, engine_version: str | None) -> list[str]:
    """SGLang's flags for DP attention over ``dp`` ranks as the release spells them."""
    if takes_attn_dp_size(engine_version):
        return ["--attn-dp-size", str(dp)]
    return ["--enable-dp-attention", "--dp-size", str(dp)]


def dp_attention_words(dp: int, engine_version: str | None) -> str:
    """``dp_attention_argv`` as one string."""
    return " ".join(dp_attention_argv(dp, engine_version))


def resolve_attn_dp_size(attn_dp_size: int | None, enable_dp_attention: bool, data_parallel_size: int | None, *,
                         engine: str, engine_version: str | None, tp: int | None = None) -> tuple[bool, int | None]:
    """(enable_dp_attention, data_parallel_size) that ``--attn-dp-size`` and the old flags given together mean, as
    SGLang 0.5.23 maps them (module doc): ``--attn-dp-size N`` (N > 1) is ``--enable-dp-attention --dp-size N``; 1 is
    SGLang's default, no DP attention; the old flags unchanged without it.

    Raises:
        InputError: --attn-dp-size off SGLang or with a release before 0.5.22, with --dp-size above 1 (replicas, which
            SGLang refuses with attention DP, or a second attention DP size), or not dividing ``tp``.
    """
    a = attn_dp_size
    if a is None:
        return enable_dp_attention, data_parallel_size
    if engine != "sglang":
        raise InputError(f"--attn-dp-size {a} is SGLang's attention DP size; vLLM's DP ranks are --data-parallel-size "
                         "N (with --enable-expert-parallel for a MoE model): use that, or --engine sglang")
    if not takes_attn_dp_size(engine_version):
        raise InputError(f"--attn-dp-size {a}: SGLang {engine_version} has no such flag (it came in 0.5.22); that "
                         f"release spells it --enable-dp-attention --dp-size {a}")
    d = data_parallel_size or 1
    if d > 1 and (a > 1 or enable_dp_attention):
        old = " --enable-dp-attention" if enable_dp_attention else ""
        why = (f"SGLang reads --dp-size next to --attn-dp-size {a} as {d} whole replicas and refuses replicas with "
               "attention data parallelism (parallel_hook.py handle_data_parallelism)" if a > 1 else
               f"SGLang takes --dp-size {d} as the attention DP size when --attn-dp-size is 1, its default")
        raise InputError(f"--attn-dp-size {a} with --dp-size {d}{old}: two attention DP sizes; {why}. Give it once: "
                         "--attn-dp-size N (--enable-dp-attention --dp-size N is its deprecated spelling)")
    if tp is not None and tp % a:
        raise InputError(f"--attn-dp-size {a} does not divide --tp {tp}: SGLang asserts tp_size % attn_dp_size == 0 "
                         "(parallel_hook.py); use a size that divides the TP size")
    if a == 1:
        return enable_dp_attention, data_parallel_size
    return True, a
