"""SGLang's expert-parallel flags on ``kvledger plan`` and the simulating commands (``EngineFlags``): taken so that a
user who types them gets kvledger's answer instead of "No such option", and refused in one paragraph naming kvledger's
equivalent.

SGLang's flags, read from its server args per release: 0.4.6 ``srt/server_args.py`` has ``--expert-parallel-size`` /
``--ep-size`` (int, default 1) and ``--enable-ep-moe`` ("The ep size is equal to the tp size"); 0.5.23
``srt/arg_groups/fields/parallel.py`` has ``ep_size`` (``--ep-size``, aliases ``--expert-parallel-size``, ``--ep``)
and no ``--enable-ep-moe``. kvledger's SGLang plan splits every routed expert over TP (``catalog/quant_tp_sglang.py``),
so it cannot say what EP changes there: the expert weights per GPU (whole experts on E / ep_size of the GPUs' share).
"""

from __future__ import annotations

__all__ = ["refuse_sglang_ep"]

_NAMES = {"vllm": "vLLM", "trtllm": "TensorRT-LLM", "tensorrt-llm": "TensorRT-LLM", "trt-llm": "TensorRT-LLM"}


def refuse_sglang_ep(engine: str, tp: int, ep_size: int | None, enable_ep_moe: bool | None,
                     words: tuple[str, str] = ("plan", "plan")) -> None:
    """Nothing when neither SGLang EP flag is given, or under SGLang ``--ep-size 1``: its default, no expert
    parallelism (every routed expert TP-sliced, as kvledger's SGLang plan has it), as a copied launch line carries it.
    ``words``: what kvledger models SGLang in (noun) and the verb that reruns it ("plan", "plan"; "simulation",
    "simulate" for the simulating commands).

    Raises:
        InputError: ``--ep-size`` or ``--enable-ep-moe`` under any engine, naming kvledger's equivalent.
    """
    if (ep_size is None or (ep_size == 1 and engine == "sglang")) and not enable_ep_moe:
        return
    from kvledger.errors import InputError

    noun, verb = words
    given = f"--ep-size {ep_size}" if ep_size is not None else "--enable-ep-moe"
    equivalent = "kvledger's equivalent is vLLM's --enable-expert-parallel (experts whole over the TP × DP GPUs)"
    if engine != "sglang":
        raise InputError(f"{given} is SGLang's flag (SGLang 0.5.23 takes --ep-size; 0.4.x also --enable-ep-moe, EP = "
                         f"TP); {_NAMES.get(engine, engine)} has no EP size: {equivalent}; pass "
                         "--enable-expert-parallel instead")
    raise InputError(f"{given}: SGLang's expert parallelism (--ep-size in 0.5.23; 0.4.x also --enable-ep-moe, EP = "
                     f"TP) is not modelled: kvledger's SGLang {noun} splits every routed expert over TP, so it cannot "
                     f"say what EP changes (the expert weights each GPU holds); {equivalent}: {verb} with --engine "
                     f"vllm --tp {tp} --enable-expert-parallel, or drop {given.split()[0]} to {verb} SGLang with the "
                     "experts TP-sliced")
