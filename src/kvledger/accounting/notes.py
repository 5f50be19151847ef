"""The sentences the memory plan prints (its notes, sources and refusals), kept apart from the rules that choose them.

Each function takes the numbers a sentence states and returns it; the rule in ``plan_vllm`` decides which
sentences apply. The upstream file and function a sentence cites is the one the rule was read from.
"""

from __future__ import annotations

__all__ = ["sglang_requested_source", "NO_SUCH_RELEASE",
           "NEWER_THAN_READ", "vllm_newer_than_read", "sglang_newer_than_read", "trtllm_newer_than_checked",
           "pp_above_layers", "DSV4_NO_UNIFIED", "block_size_from", "hybrid_block_size",
           "gpu_memory_utilization_from", "PROFILE_TERMS_FROM_0_19", "pp_binding_stage", "blocks_overridden",
           "printed_gib_range", "stage_without_kv_group", "model_without_kv", "NULL_BLOCK", "sliding_inflight",
           "WEIGHTS_GIVEN", "weights_computed", "ACTIVATION_GIVEN", "activation_modelled", "NON_TORCH_GIVEN",
           "CUDAGRAPHS_GIVEN", "cudagraphs_subtracted", "cudagraphs_not_subtracted", "SGLANG_RESERVE",
           "sglang_reserve_source", "SGLANG_MAMBA_POOL_SOURCE", "sglang_mamba_pool", "sglang_no_mamba_request",
           "sglang_mamba_cap", "sglang_settings", "SGLANG_REQUESTED", "SGLANG_LOAD_EXTRA", "SGLANG_LOAD_EXTRA_SOURCE",
           "SGLANG_ROPE_BUFFER", "SGLANG_SEGMENT_TAILS", "sglang_load_buffers_source",
           "trtllm_activation", "TRTLLM_NON_TORCH", "TRTLLM_ENGINE_ACTIVATION_RANGE",
           "trtllm_reserve", "trtllm_reserve_source", "trtllm_block_rule", "trtllm_tokens_per_block_source",
           "trtllm_settings", "TRTLLM_REQUESTED", "TRTLLM_REQUESTED_ENGINE", "TRTLLM_RESERVE_RANGE",
           "vllm_wddm_startup", "sglang_wddm", "SGLANG_REQUESTED_WDDM", "SGLANG_FP8_KV"]


# --- the plan's notes -------------------------------------------------------------------------------------------------

#: the words every engine's note on a version newer than the rules read shares (plan and simulate print those notes)
NEWER_THAN_READ = "is newer than the newest release"
#: the words of ``vllm_releases.unknown_release_note`` (a patch release PyPI does not list), printed where the above is
NO_SUCH_RELEASE = "is no release: PyPI lists"


def vllm_newer_than_read(version: str, latest: str) -> str:
    return f"vLLM {version} {NEWER_THAN_READ} whose code was read ({latest}): its rules are applied"


def sglang_newer_than_read(version: str, latest: str) -> str:
    return f"SGLang {version} {NEWER_THAN_READ} whose code was read ({latest}): its rules are applied"


def trtllm_newer_than_checked(version: str, latest: str, runtime: str) -> str:
    return (f"TensorRT-LLM {version} {NEWER_THAN_READ} checked against a start-up log ({latest}; the code read is one "
            f"unpinned copy of main): the {runtime} rules are applied")


def block_size_from(block_size: int, source: str) -> str:
    return f"block_size {block_size}: {source}"


def hybrid_block_size(block_size: int) -> str:
    """Appended to :func:`block_size_from` when the hybrid layout changes the attention block."""
    return f"; the hybrid layout then sets the attention block to {block_size} tokens (below)"


def gpu_memory_utilization_from(util: float, source: str) -> str:
    return f"gpu_memory_utilization {util}: {source}"


PROFILE_TERMS_FROM_0_19 = (
    "the profile terms are those measured on vLLM 0.19; from 0.27.0 (utils/mem_utils.py::memory_profiling; not in "
    "0.26.0) vLLM charges non-KV memory as total consumed (weights, persistent buffers and non-torch growth since "
    "start-up) + the transient peak (torch peak − torch allocated after the profile, printed as 'peak activation'), "
    "and buffers kept between weight loading and the profile are not modelled (no such start-up log in the data)")


def pp_binding_stage(pp: int, rank: int) -> str:
    return (f"pipeline parallel {pp}: stage {rank} binds (fewest blocks; vLLM keeps the smallest block count over "
            "workers); the ledger shows that stage's GPU, every stage is under 'stages'")


def blocks_overridden(num_blocks: int) -> str:
    return f"num_gpu_blocks_override = {num_blocks:,} replaces the computed block count"


def printed_gib_range(available_gib: float, lo: int, hi: int) -> str:
    return (f"vLLM prints available memory to 2 decimals: any value printing as {available_gib:.2f} GiB gives "
            f"{lo:,}–{hi:,} blocks; pass bytes for an exact count")


def stage_without_kv_group(rank: int) -> str:
    return (f"pipeline stage {rank}'s layers all read other layers' K/V: that worker has no KV cache group and vLLM "
            "gives it 1 block (num_blocks = 1 without groups), then keeps the smallest block count over workers "
            "(kv_cache_planning.get_kv_cache_configs): no usable block; choose a --pp that leaves every stage a layer "
            "with its own cache")


def model_without_kv(max_num_seqs: int) -> str:
    return ("no KV cache of its own: vLLM skips the memory profile, gives the KV cache 0 bytes and keeps one null "
            "block (v1/engine/core.py _initialize_kv_caches, kv_cache_utils.get_kv_cache_config_from_groups); it "
            f"prints no KV cache size or maximum concurrency, and only max_num_seqs = {max_num_seqs:,} limits the "
            "requests running at once")


NULL_BLOCK = "block 0 is the null block (block_pool.py): usable blocks = num_gpu_blocks − 1"


def sliding_inflight(tokens: int, source: str) -> str:
    return f"sliding-window block demand uses F = {tokens:,} tokens: {source}"


# --- refusals ---------------------------------------------------------------------------------------------------------

def pp_above_layers(pp: int, model: str, num_layers: int) -> str:
    return f"--pp {pp} is more pipeline stages than {model} has layers ({num_layers})"


DSV4_NO_UNIFIED = ("--disable-hybrid-kv-cache-manager is not modelled for DeepSeek-V4: its caches (blocks of 256, 64, "
                   "8 and 4 tokens) are planned in vLLM 0.33's packed hybrid layout only")

# --- sources of the memory ledger's deductions ------------------------------------------------------------------------

WEIGHTS_GIVEN = "given (your log's 'Model loading took')"
ACTIVATION_GIVEN = "given (your log's torch peak increase)"
NON_TORCH_GIVEN = "given"
CUDAGRAPHS_GIVEN = "given (your log's 'Estimated CUDA graph memory')"


def weights_computed(how: str) -> str:
    return f"computed as vLLM allocates them: {how}"


def activation_modelled(version: str, source: str) -> str:
    return f"model, vLLM {version} profile run: {source}"


def cudagraphs_subtracted(source: str) -> str:
    return source + "; subtracted since vLLM 0.20 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 in envs.py)"


def cudagraphs_not_subtracted(version: str, rocm: bool = False) -> str:
    if rocm and tuple(int(x) for x in version.split(".")[:2]) >= (0, 20):  # vllm_rules.subtracts_cudagraphs
        return (f"not subtracted by vLLM {version} on ROCm (gpu_worker.py estimates graphs on CUDA only in 0.20–0.25; "
                "HIP graphs are captured after the KV pool is sized; 0.26+ subtracts an estimate on ROCm too)")
    return f"not subtracted by vLLM {version} (captured after the KV pool is sized; 0.20+ subtracts an estimate)"


# --- SGLang's memory plan (plan_other.sglang_plan; SGLang 0.5.23 mem_cache/kv_cache_configurator.py) -----------------

SGLANG_RESERVE = "reserve (1 − mem_fraction_static) × free before load"
SGLANG_REQUESTED = ("free before the weights load (device total − the memory held before it, "
                    "sglang_rules.SGLANG_PRELOAD_GIB)")
SGLANG_REQUESTED_WDDM = ("free before the weights load (the whole board − the memory held before it, "
                         "sglang_rules.SGLANG_PRELOAD_GIB − the display driver's hold, wddm.py)")
SGLANG_LOAD_EXTRA = "weight-load overhead"
SGLANG_LOAD_EXTRA_SOURCE = ("measured: what \"Load weight end. ... mem usage\" adds to the parameters, the RoPE buffer "
                            "and the segment tails, −0.001 to 0.100 GiB in six public start-ups "
                            "(sglang_rules.SGLANG_LOAD_EXTRA_GIB)")
SGLANG_ROPE_BUFFER = "RoPE cos/sin buffer"
SGLANG_FP8_KV = ("--kv-cache-dtype fp8 is vLLM's spelling: SGLang names its FP8 KV formats fp8_e4m3 and fp8_e5m2, so "
                 "pass --kv-cache-dtype fp8_e4m3 to SGLang (fp8_e5m2 before 0.4.1.post6, whose choices lack e4m3; "
                 "planned here at 1 B per element, as either format stores)")
SGLANG_SEGMENT_TAILS = "allocator segment tails"


def sglang_load_buffers_source(how: str) -> str:
    return f"computed (counted in SGLang's \"Load weight end. ... mem usage\"; sglang_load.py): {how}"
SGLANG_MAMBA_POOL_SOURCE = ("mamba_full_memory_ratio 0.9: 0.9/1.9 of the budget in whole per-request slots "
                            "(kv_cache_configurator.py::_handle_max_mamba_cache)")


def sglang_reserve_source(share: float, total_gib: float, held_gib: float, custom_ar: bool) -> str:
    return (f"{share:.3f} × ({total_gib:.2f} − {held_gib:.2f} GiB held before the weights load, measured "
            f"{'with' if custom_ar else 'without'} custom all-reduce) GiB; activations and graphs live here")


def sglang_requested_source(total_gib: float, held_gib: float, driver_gib: float, custom_ar: bool) -> str:
    return (f"device total {total_gib:.2f} − {held_gib:.2f} GiB held before the weights load (measured "
            f"{'with' if custom_ar else 'without'} custom all-reduce: sglang_rules.SGLANG_PRELOAD_GIB)"
            + (f" − {driver_gib:.2f} GiB the display driver holds (wddm.py)" if driver_gib else ""))


def sglang_preload_range(high_gib: float, mfs: float) -> str:
    return (f"memory in use before the weights load: 0.13 GiB (CUDA context) up to {high_gib:.2f} GiB in public "
            f"SGLang logs at this TP (sglang_rules.SGLANG_PRELOAD_HIGH_GIB), × mem_fraction_static {mfs:g}")


def sglang_mamba_pool(slots: int) -> str:
    return f"Mamba state pool ({slots:,} + 1 request slots)"


def sglang_no_mamba_request(slots: int, ratio: int, why: str) -> str:
    return (f"SGLang would refuse to start: {slots} Mamba state slots serve no request at {ratio} slots each ({why}); "
            "raise --mem-fraction-static or use a GPU with more memory")


def sglang_mamba_cap(cap: int, slots: int, ratio: int, why: str) -> str:
    return (f"max_running_requests capped to {cap:,} by the Mamba state pool: {slots:,} slots // {ratio} ({why}; "
            "SGLang 0.5.23 kv_cache_configurator.resolve_max_num_reqs)")


def sglang_settings(mfs: float, mfs_source: str, chunked_prefill_size: int, max_running: int,
                    mamba_capped: bool, older: str | None = None, pool_slot: bool = False,
                    cps_given: bool = False) -> list[str]:
    """``older``: the SGLang release given when older than the newest read; ``pool_slot``: its request pool holds one
    more than the clamp (before 0.4.9, plan_other.SGLANG_POOL_SLOT_UNTIL); ``cps_given``: the chunk was given."""
    cps = f"SGLang {older} default for this GPU, server_args.py" if older else "SGLang default for this GPU"
    cps = "given: --chunked-prefill-size, kvledger's --max-num-batched-tokens" if cps_given else cps
    clamp = "clamp(#tokens/context_len·512, 2048, 4096)" + (" + 1" if pool_slot else "")
    where = (f"; SGLang {older}: model_runner.py init_memory_pool, managers/tp_worker.py" if older else "")
    return [f"mem_fraction_static {mfs}: {mfs_source}", f"chunked_prefill_size {chunked_prefill_size} ({cps})",
            f"max_running_requests {max_running}: min({clamp}, #tokens//2"
            + (", the Mamba state pool's cap" if mamba_capped else "") + where + ")",
            "SGLang prints sizes in GiB labelled 'GB'"]


# --- TensorRT-LLM's memory plan (plan_other.trtllm_plan; runtime "pytorch" or "tensorrt") -----------------------------

TRTLLM_NON_TORCH = "assumed: vLLM's 0.13 GiB (vLLM ≤0.17, H100, TP 1); no TensorRT-LLM log prints this term"
TRTLLM_ENGINE_ACTIVATION_RANGE = ("high: 1.5 × (TensorRT sizes it at build; Llama-2-7B FP8 printed +11% over the "
                                  "model, TensorRT-LLM's benchmarks/Suite.md; FP8 GEMMs can need more, the memory FAQ)")
TRTLLM_RESERVE_RANGE = "follows the free memory's range (the device total's and each term's low/high)"
TRTLLM_REQUESTED = "device total (the fraction applies to what is free after the dry run)"
TRTLLM_REQUESTED_ENGINE = ("device total (the fraction applies to what is free once the engine, its runtime buffers "
                           "and its decoder are loaded)")


def _after(runtime: str) -> str:
    return "dry run" if runtime == "pytorch" else "engine loads"


def trtllm_activation(runtime: str) -> str:
    if runtime == "pytorch":
        return "activation peak of the dry run"
    return "TensorRT engine activation memory (allocated at load)"


def trtllm_reserve(free_after_gib: float, runtime: str) -> str:
    return f"reserve (1 − free_gpu_memory_fraction) × {free_after_gib:.2f} GiB free after the " + _after(runtime)


def trtllm_reserve_source(runtime: str) -> str:
    return ("KvCacheCreator._cal_max_memory keeps this share free" if runtime == "pytorch"
            else "kvCacheManager.cpp calculateMaxNumBlocks takes only the fraction of free memory")


def trtllm_block_rule(runtime: str, windows: list, round_up: bool = False) -> str:
    """``windows``: the per-window pools (``window``, ``max_tokens``, ``blocks``), the full-attention one last."""
    if len(windows) == 1 and runtime == "pytorch":
        if round_up:
            return ("blocks = ceil(max_tokens / tokens_per_block) (one window, PyTorch backend before 1.0: "
                    "resource_manager.py::calculate_max_num_blocks used math.ceil)")
        return "blocks = max_tokens // tokens_per_block (one window: resource_manager.py::calculate_max_num_blocks)"
    if len(windows) == 1:
        return ("blocks = ceil(max_tokens / tokens_per_block) (TensorRT-engine executor: kvCacheManager.cpp::"
                "KVCacheManager::calculateMaxNumBlocks rounds up)")
    pools = "; ".join(f"window {w.window:,}: {w.max_tokens:,} tokens, {w.blocks:,} blocks" for w in windows)
    return (f"one pool per attention window ({pools}); memory shared by bytes-per-token × window, blocks = "
            "ceil(max_tokens / tokens_per_block) (kvCacheManager.cpp::calculateMaxNumBlocks); the largest-window pool "
            "is shown and sets concurrency, the sliding pools hold at most their window per request")


def trtllm_tokens_per_block_source(given: bool, runtime: str) -> str:
    if given:
        return "given"
    if runtime == "pytorch":
        return "KvCacheConfig default"
    return ("assumed: the engine's build-time tokens_per_block, 64 in trtllm-build's attention plugin config; pass "
            "--block-size")


def trtllm_settings(frac: float, frac_given: bool, runtime: str, tokens_per_block: int, tpb_source: str,
                    bytes_per_token: float) -> list[str]:
    return [f"free_gpu_memory_fraction {frac} ({'given' if frac_given else 'default'}) of memory free after the "
            + _after(runtime), f"tokens_per_block {tokens_per_block} ({tpb_source})",
            f"bytes per token {bytes_per_token:,.0f} B from get_cache_size_per_token (integer division by TP)"]


# --- the Windows display driver (--wddm) ------------------------------------------------------------------------------

_GIB = float(1 << 30)


def vllm_wddm_startup(ver: str, file: str, verdict: str, util: float, requested: int, total: int,
                      free: tuple[float, float, float], held: float, own: float, mx: tuple[float, float, float]) -> str:
    """The start-up sentence of a vLLM plan under --wddm (``wddm_engines.vllm_startup_check``)."""
    f, lo, hi = (x / _GIB for x in free)
    frees = (f"free at start-up {total / _GIB:.2f} − {held / _GIB:.2f} (display driver) − {own / _GIB:.2f} (this "
             f"process) = {f:.2f} GiB ({lo:.2f}–{hi:.2f})")
    asks = f"gpu_memory_utilization {util:g} asks {requested / _GIB:.2f} GiB"
    largest = f"the largest that starts is {mx[0]:.3f} ({mx[1]:.3f}–{mx[2]:.3f})"
    if verdict == "starts":
        return f"start-up (--wddm): {asks}; {frees}: vLLM {ver} starts, even at the range's low end; {largest}"
    where = "at the range's low end" if verdict in ("may_refuse", "may_run_out") else "at the plan's point"
    if verdict in ("may_refuse", "refuses"):
        return (f"warning (--wddm): {asks}; {frees}: {where} vLLM {ver} refuses to start ({file}: \"Free memory on "
                f"device ... on startup is less than desired GPU memory utilization\"); {largest}: "
                f"--gpu-memory-utilization {mx[1]:.3f} starts even at the low end")
    return (f"warning (--wddm): {asks}; {frees}: more than is free {where}, and vLLM {ver} neither checks at start-up "
            f"nor counts the driver's hold ({file}), so its cache allocation or CUDA-graph capture may run out of "
            f"memory; up to {mx[0]:.3f} ({mx[1]:.3f}–{mx[2]:.3f}) asks no more than is free")


def sglang_wddm(held_gib: float, mfs: float) -> str:
    """The SGLang plan's note under --wddm."""
    return (f"--wddm: CUDA reports the whole board as the total and the display driver holds {held_gib:.2f} GiB before "
            f"SGLang starts; SGLang sizes the pool from the free memory before and after its weights load (KV = free "
            f"after − free before × (1 − mem_fraction_static), mem_cache/kv_cache_configurator.py::"
            f"_profile_available_bytes in 0.5.23, model_runner.py::profile_max_num_token in 0.4.6), so the hold "
            f"lowers the KV by {held_gib:.2f} × {mfs:g} = {held_gib * mfs:.2f} GiB")
