"""vLLM's V2 model runner: which releases run it, and what its memory profile deducts before the KV pool.

Read in the wheels of 0.21.0, 0.22.0, 0.23.0, 0.24.0, 0.25.0, 0.26.0, 0.27.0, 0.27.1, 0.28.0, 0.29.0, 0.30.0, 0.31.0,
0.32.0 and 0.33.0 (``envs.py``, ``config/vllm.py::VllmConfig.use_v2_model_runner``, ``v1/worker/gpu/model_runner.py``,
``v1/worker/gpu/cudagraph_utils.py``, ``v1/worker/gpu/sample/``); its package ``v1/worker/gpu/`` first ships in 0.12.0
(absent in 0.11.2; also in 0.13.0, 0.14.1, 0.16.0, 0.18.0 and 0.20.0).

Which runner (``VLLM_USE_V2_MODEL_RUNNER``; set, it decides: ``--model-runner v1/v2`` here):
  * up to 0.21 the variable defaults to "0": V1 unless asked;
  * 0.22–0.28 it defaults to unset and ``_is_default_v2_model_runner_model`` decides for generative models: 0.22
    Qwen3ForCausalLM, 0.23 also Llama/Mistral, both only dense and unquantized; 0.24 a list (MoE and quantized too);
    0.25–0.28 every dense model plus the listed MoE architectures, never a hybrid (Mamba + attention; 0.28: unless
    listed) or attention-free model;
  * from 0.29 every model, except on ROCm the architectures of ``ROCM_DEFAULT_MRV1_ARCHITECTURES`` (0.29–0.31).
  Features the V2 runner lacks (n-gram drafts, dual batch overlap, ...) fall back to V1; none is a plan setting.

What its profile deducts (``gpu_worker.py::determine_available_memory`` is shared by both runners):
  * CUDA graphs: ``GPUModelRunner.profile_cudagraph_memory`` of the V2 runner returns 0 up to 0.28, so nothing is
    subtracted although VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is on; from 0.29 it captures the PIECEWISE graphs and
    the two largest FULL ones in a throwaway pool and extrapolates the rest as first + (n − 1) × second
    (``cudagraph_utils.py::profile_cudagraph_memory``): the V1 rule's shape, so the fitted sizes are kept.
  * activation: ``profile_run`` runs the forward over max_num_batched_tokens tokens in min(tokens, max_num_seqs) dummy
    requests (attention skipped, as V1), then ``_dummy_sampler_run`` on one logit row per request. The dummy requests'
    sampling states are never set: temperature 0 (``UvaBackedTensor`` starts at zeros), top-k = vocabulary, top-p 1,
    so ``Sampler._requires_logits_processing`` is False and the greedy path takes no fp32 copy, no top-k/top-p and
    no FlashInfer: the model-dtype logits (and a (requests × ceil(vocab / 1024)) argmax scratch) are the sampler's
    peak. 0.33 adds a second pass with ``SamplingParams.for_sampler_warmup()`` (temperature 0.9, top-k 50, top-p 0.9,
    penalties, logprobs) "so the profiled peak must" pay for the fp32 pipeline: not sized from V2's kernels here, the
    version's V1 sampler bytes stand in for it (same fp32 copy, top-k/top-p and probabilities).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.catalog.layers import StateLayer
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["MODEL_RUNNERS", "V2_FROM", "RunnerChoice", "model_runner", "runner_note", "v2_subtracts_cudagraphs",
           "v2_sampler"]

MODEL_RUNNERS = ("auto", "v1", "v2")
"""``--model-runner``: auto (the version's default for the model), v1 or v2 (``VLLM_USE_V2_MODEL_RUNNER`` 0/1)."""

V2_FROM = (0, 12, 0)
"""First release with the V2 runner's package ``v1/worker/gpu/`` and ``VLLM_USE_V2_MODEL_RUNNER`` (0.12.0; absent in
0.11.2)."""

_V2_PROFILE_READ = (0, 21, 0)
"""The V2 runner's profile (profile_run, profile_cudagraph_memory, the sampler) was read from 0.21."""

_LISTED = {
    (0, 22): {"Qwen3ForCausalLM"},
    (0, 23): {"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"},
    (0, 24): {"Qwen3ForCausalLM", "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM",
              "LlamaForCausalLM", "MistralForCausalLM"},
    (0, 25): {"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"},
    (0, 26): {"DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM", "InklingForConditionalGeneration",
              "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM"},
}
"""``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` of ``config/vllm.py`` by release (0.27 adds KimiK3ForConditionalGeneration,
off on ROCm; 0.28 DeepseekV4ForCausalLM)."""
_LISTED[(0, 27)] = _LISTED[(0, 26)] | {"KimiK3ForConditionalGeneration"}
_LISTED[(0, 28)] = _LISTED[(0, 27)] | {"DeepseekV4ForCausalLM"}

_ROCM_V1 = {(0, 27): {"KimiK3ForConditionalGeneration"}, (0, 29): {"DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM"},
            (0, 30): {"DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM", "GlmMoeDsaForCausalLM"}}
"""Architectures kept on V1 on ROCm (0.27 ``ROCM_EXCLUDED_V2_MODEL_RUNNER_ARCHITECTURES``, 0.29–0.31
``ROCM_DEFAULT_MRV1_ARCHITECTURES``; 0.28 and 0.32–0.33 have none)."""
_ROCM_V1[(0, 31)] = _ROCM_V1[(0, 30)]


@dataclass(frozen=True)
class RunnerChoice:
    """The model runner a start-up uses (``v2``: True for the V2 runner) and why."""

    v2: bool
    why: str


def _kind(model: ModelSpec) -> tuple[bool, bool]:
    """(hybrid: state layers beside attention, attention-free: state layers only), as vLLM's is_hybrid and
    is_attention_free of the model class."""
    state = [layer for layer in model.layers if isinstance(layer, StateLayer)]
    attn = [layer for layer in model.layers if layer is not None and not isinstance(layer, StateLayer)]
    return bool(state and attn), bool(state and not attn)


def _default_v2(model: ModelSpec, ver: tuple[int, int, int], rocm: bool, online_quant: bool) -> tuple[bool, str]:
    """The version's default for ``model`` (``VllmConfig.use_v2_model_runner`` with the variable unset);
    ``online_quant``: ``--quantization`` given (vLLM's ``is_quantized`` counts it as a quantized checkpoint)."""
    mm = ver[:2]
    archs = set(model.architectures)
    if rocm and archs & _ROCM_V1.get(mm, set()):
        return False, "its architecture stays on V1 on ROCm"
    if ver >= (0, 29, 0):
        return True, "every model from 0.29"
    listed = bool(archs & _LISTED[mm])
    if mm <= (0, 23):
        quant = model.quant.method != "none" or online_quant
        ok = listed and not model.is_moe and not quant
        return ok, ("listed, dense and unquantized" if ok else "only listed dense unquantized models (0.22–0.23)")
    if mm == (0, 24):
        return listed, "listed" if listed else "only the listed architectures (0.24)"
    hybrid, attention_free = _kind(model)
    if attention_free or (hybrid and (mm < (0, 28) or not listed)):
        return False, "hybrid (unless listed, 0.28) and attention-free models stay on V1 in 0.25–0.28"
    ok = listed or not model.is_moe
    return ok, ("listed" if listed else "a dense model") if ok else "MoE architectures only when listed (0.25–0.28)"


def model_runner(model: ModelSpec, ver: tuple[int, int, int], choice: str = "auto", rocm: bool = False,
                 online_quant: bool = False) -> RunnerChoice:
    """Which runner vLLM ``ver`` runs ``model`` (the checkpoint) on (``choice``: auto, v1 or v2,
    ``VLLM_USE_V2_MODEL_RUNNER``; ``rocm``: an AMD GPU; ``online_quant``: ``--quantization`` given).

    Raises:
        InputError: v2 before the V2 runner exists (0.12).
    """
    vtxt = ".".join(map(str, ver))
    if choice == "v1":
        return RunnerChoice(False, "V1 model runner (VLLM_USE_V2_MODEL_RUNNER=0, --model-runner v1)")
    if choice == "v2":
        if ver < V2_FROM:
            raise InputError(f"--model-runner v2: vLLM {vtxt} has no V2 model runner (its package v1/worker/gpu/ and "
                             "VLLM_USE_V2_MODEL_RUNNER first ship in 0.12.0; absent in 0.11.2); use 0.12 or later")
        tail = "" if ver >= _V2_PROFILE_READ else f"; its profile was read from 0.21 and is applied to {vtxt}"
        return RunnerChoice(True, f"V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1, --model-runner v2{tail})")
    if ver < (0, 22, 0):
        return RunnerChoice(False, "V1 model runner (envs.py: VLLM_USE_V2_MODEL_RUNNER defaults to 0 up to 0.21)")
    v2, why = _default_v2(model, ver, rocm, online_quant)
    name = "V2" if v2 else "V1"
    return RunnerChoice(v2, f"{name} model runner: vLLM {vtxt}'s default for {'/'.join(model.architectures) or 'it'}"
                            f" ({why}; config/vllm.py::use_v2_model_runner; --model-runner v1/v2 sets "
                            "VLLM_USE_V2_MODEL_RUNNER)")


def v2_subtracts_cudagraphs(ver: tuple[int, int, int]) -> tuple[bool, str]:
    """Whether the V2 runner's profile estimates CUDA graphs, and the code that says so."""
    if ver >= (0, 29, 0):
        return True, ("V2 runner: gpu/cudagraph_utils.py::profile_cudagraph_memory (0.29–0.33) captures PIECEWISE "
                      "graphs and the 2 largest FULL ones, first + (n − 1) × second for the rest")
    return False, (f"not subtracted: the V2 model runner's profile_cudagraph_memory returns 0 in "
                   f"{'.'.join(map(str, ver))} (v1/worker/gpu/model_runner.py, 0.21–0.28); graphs are captured "
                   "after the KV pool is sized")


def v2_sampler(ver: tuple[int, int, int]) -> str | None:
    """The sampler backend of the V2 profile run: "v2-greedy" (logits only) up to 0.32, None from 0.33 (its warm-up
    pass: the version's V1 sampler bytes)."""
    return None if ver >= (0, 33, 0) else "v2-greedy"


def runner_note(choice: RunnerChoice, ver: tuple[int, int, int]) -> str:
    """The plan's note: the runner, why, and what it changes in the profile's terms."""
    if not choice.v2:
        return choice.why + ": the V1 profile terms"
    graphs = "a CUDA-graph estimate (cudagraph_utils.py)" if ver >= (0, 29, 0) else "no CUDA-graph estimate"
    smp = ("a sampler warm-up pass sized with the V1 sampler's bytes (not V2's kernels)" if v2_sampler(ver) is None
           else "a greedy dummy sampler: the model-dtype logits only")
    return f"{choice.why}: profile with {graphs} and {smp} (v1/worker/gpu/model_runner.py::profile_run)"
