"""The engines' expert-parallel size flags on ``kvledger plan`` and the simulating commands (``--ep-size``,
``--enable-ep-moe``): taken so that a user who types them gets kvledger's answer instead of "No such option", and
refused in one paragraph once the model is known, naming what applies to it.

The engines' flags, read from their sources:

* SGLang 0.4.6 ``srt/server_args.py`` has ``--expert-parallel-size`` / ``--ep-size`` (int, default 1) and
  ``--enable-ep-moe`` ("The ep size is equal to the tp size"); 0.5.23 ``srt/arg_groups/fields/parallel.py`` has
  ``ep_size`` (``--ep-size``, aliases ``--expert-parallel-size``, ``--ep``) and no ``--enable-ep-moe``.
* vLLM has no EP size: ``--enable-expert-parallel`` is a switch, EP = TP × DP (``fused_moe/config.py ::
  FusedMoEParallelConfig.make``), refused for a model without experts (``config/model.py ::
  _verify_with_expert_parallelism``).
* TensorRT-LLM's ``trtllm-serve`` takes ``--moe_expert_parallel_size`` / ``--ep_size`` (int, default None), passed
  to the LLM API's ``moe_expert_parallel_size`` (``tensorrt_llm/commands/serve.py``).

SGLang's ``--ep-size`` on a MoE model is planned and simulated (accounting/sglang_ep.py, which refuses the sizes
SGLang refuses); 0.5.23 has no ``--enable-ep-moe``, so that flag is refused naming ``--ep-size`` = TP. kvledger's
TensorRT-LLM plan splits every routed expert over TP ("split over TP by tensor"), so it cannot say what EP changes.
A dense model has no experts, so no engine's expert parallelism applies to it: the refusal then says so and names TP
and data parallelism, which do.
"""

from __future__ import annotations

from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["refuse_ep_flags"]

_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "tensorrt-llm": "TensorRT-LLM",
          "trt-llm": "TensorRT-LLM"}
_SGLANG_FLAG = "SGLang 0.5.23 takes --ep-size; 0.4.x also --enable-ep-moe, EP = TP"
_VLLM_EP = "kvledger's equivalent is vLLM's --enable-expert-parallel (experts whole over the TP × DP GPUs)"
#: how each engine spreads a dense model over more GPUs, in kvledger's flags (what each engine's plan takes)
_WIDER = {"vllm": "raise --tp (weights and KV heads split over more GPUs) or add --data-parallel-size N (N engines, "
                  "each with its own KV pool)",
          "sglang": "raise --tp (weights and KV heads split over more GPUs), or run whole replicas (SGLang's --dp-size "
                    "without DP attention: each replica's {noun} is this one's)",
          "trtllm": "raise --tp (weights and KV heads split over more GPUs), or run whole replicas (each replica's "
                    "{noun} is this one's)"}


def refuse_ep_flags(engine: str, tp: int, ep_size: int | None, enable_ep_moe: bool | None, model: ModelSpec,
                    words: tuple[str, str] = ("plan", "plan")) -> None:
    """Nothing when neither EP-size flag is given, or at ``--ep-size 1`` under SGLang or TensorRT-LLM (no expert
    parallelism: every routed expert TP-sliced, as kvledger's plans have them), as a copied launch line carries it.
    ``words``: what kvledger models the engine in (noun) and the verb that reruns it ("plan", "plan"; "simulation",
    "simulate" for the simulating commands).

    Raises:
        InputError: any other ``--ep-size`` or ``--enable-ep-moe``: for a dense model, that it has no experts (and
            the TP / DP flags that spread it); for a MoE model, kvledger's equivalent (vLLM's
            ``--enable-expert-parallel``).
    """
    engine = "trtllm" if _NAMES.get(engine) == "TensorRT-LLM" else engine
    if (ep_size is None or (ep_size == 1 and engine in ("sglang", "trtllm"))) and not enable_ep_moe:
        return
    if engine == "sglang" and model.is_moe and not enable_ep_moe:
        return  # planned and simulated: accounting/sglang_ep.py checks the size as SGLang does
    given = f"--ep-size {ep_size}" if ep_size is not None else "--enable-ep-moe"
    flag, noun, verb = given.split()[0], *words
    if not model.is_moe:
        where = (f"at --tp {tp} its weights are already split over {tp} GPUs" if tp > 1
                 else "at --tp 1 it is whole on one GPU")
        raise InputError(f"{given}: {model.name} has no routed experts, so expert parallelism has nothing to place in "
                         "any engine (SGLang's --ep-size, vLLM's --enable-expert-parallel, which vLLM refuses for such "
                         f"a model, TensorRT-LLM's --ep_size); drop {flag}: {where}; for more GPUs, "
                         + _WIDER.get(engine, _WIDER["vllm"]).format(noun=noun))
    if engine == "vllm" or (flag == "--enable-ep-moe" and engine != "sglang"):
        raise InputError(f"{given} is SGLang's flag ({_SGLANG_FLAG}); {_NAMES.get(engine, engine)} has no "
                         f"{'EP size' if engine == 'vllm' else 'such flag'}: {_VLLM_EP}; pass --enable-expert-parallel "
                         f"instead" + (f" and {verb} with --engine vllm" if engine != "vllm" else ""))
    name = _NAMES.get(engine, engine)
    if engine == "sglang":  # --enable-ep-moe on a MoE model: 0.4.x's EP = TP switch, gone from 0.5.23
        raise InputError(f"--enable-ep-moe is SGLang 0.4.x's switch for EP = TP; SGLang 0.5.23 (the rules kvledger "
                         f"{verb}s with) takes --ep-size instead: pass --ep-size {tp} (with --tp {tp})")
    who = f"{name}'s expert parallelism (trtllm-serve's --ep_size)"
    raise InputError(f"{given}: {who} is not modelled: kvledger's {name} {noun} splits every routed expert over TP, "
                     f"so it cannot say what EP changes (the expert weights each GPU holds); {_VLLM_EP}: {verb} with "
                     f"--engine vllm --tp {tp} --enable-expert-parallel, or drop {flag} to {verb} {name} with the "
                     "experts TP-sliced")
