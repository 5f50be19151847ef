"""The sentences the simulation's engine settings print (notes and refusals), apart from the rules in ``from_plan``.

Each function takes the numbers a sentence states; ``from_plan.engine_config_from_plan`` decides which apply.
"""

from __future__ import annotations

from typing import Any

__all__ = ["model_without_kv", "override_leaves_no_block", "does_not_fit", "pool_from_override", "pool_from_plan",
           "limits", "kv_pool", "SGLANG_NULL_BLOCK", "RELEASE_RULES", "sglang_release_rules", "sglang_pool_caps",
           "SGLANG_MAMBA_SLOTS", "SGLANG_SLIDING_POOL", "policy_preset", "within_bursts", "v0_engine_by_default",
           "async_scheduling", "HYBRID_LAYOUT", "sliding_prefill_chunk", "overloaded", "expected_clause",
           "CAPACITY_WARNINGS", "ATTAINMENT_CEILING", "ITL_BUDGET", "sweep_without_load", "sweep_misses_target",
           "sweep_capacity", "paced_behind"]

_GIB = 2**30


# --- refusals ---------------------------------------------------------------------------------------------------------

def model_without_kv(model: str) -> str:
    return (f"{model} keeps no KV cache of its own (every layer reads another model's K/V, as a speculative draft "
            "does): the simulator schedules requests by their KV blocks, so it has nothing to model here; simulate the "
            "target model (its KV pool is what a request holds)")


def override_leaves_no_block(num_blocks: int, available_bytes: float) -> str:
    return (f"--num-gpu-blocks-override {num_blocks:,} leaves no usable block: vLLM's block pool takes block 0 as its "
            "null block (vllm/v1/core/block_pool.py, BlockPool), so an override of 1 leaves requests nothing; give "
            "--num-gpu-blocks-override 2 or more (the model fits: the memory plan leaves "
            f"{available_bytes / _GIB:.2f} GiB for the KV cache)")


def does_not_fit(available_bytes: float, usable_blocks: int) -> str:
    left = (f"is short by {-available_bytes / _GIB:.2f} GiB before any KV cache" if available_bytes < 0 else
            f"leaves {available_bytes / _GIB:.2f} GiB for the KV cache ({usable_blocks:,} usable blocks)")
    return f"the model does not fit: the memory plan {left}; see `kvledger plan` for the breakdown and the fixes"


# --- the KV pool and limits -------------------------------------------------------------------------------------------

def pool_from_override(m: Any, source: str = "--num-gpu-blocks-override") -> str:
    """``m``: the plan's MemoryPlan; ``source``: where the block count was given (the flag, or a run's record)."""
    return (f"{m.num_gpu_blocks:,} blocks of {m.block_size} tokens from {source} "
            f"({m.num_gpu_blocks * m.bytes_per_block / _GIB:.2f} GiB of KV per GPU; the {m.engine} "
            f"{m.engine_version} memory plan would leave {m.available_kv_bytes / _GIB:.2f} GiB)")


def pool_from_plan(m: Any) -> str:
    return (f"{m.num_gpu_blocks:,} blocks of {m.block_size} tokens from the {m.engine} {m.engine_version} memory plan "
            f"({m.available_kv_bytes / _GIB:.2f} GiB for KV per GPU)")


def limits(m: Any, source: str = "engine defaults unless set", *, config: Any) -> str:
    """``source``: where max_model_len, max_num_batched_tokens and max_num_seqs come from; ``config``: the
    EngineConfig the run uses, whose token budget and sequence cap win over the plan's where the engine's own rules
    set them from the flags (``sched_defaults``: V0's defaults, chunked prefill off)."""
    mml, mnbt, seqs = config.max_model_len, config.max_num_batched_tokens, config.max_num_seqs
    if m.engine == "sglang":
        return (f"max_model_len {mml:,}, chunked_prefill_size {mnbt:,} (as max_num_batched_tokens), "
                f"max_running_requests {seqs:,} (as max_num_seqs; SGLang's defaults unless set)")
    return f"max_model_len {mml:,}, max_num_batched_tokens {mnbt:,}, max_num_seqs {seqs:,} ({source})"


def kv_pool(pool: str, limits_text: str) -> str:
    return f"KV pool: {pool}; {limits_text}"


SGLANG_NULL_BLOCK = ("SGLang pool: the usable token slots + one page, page 0: SGLang's padded slot, kept for the dummy "
                     "writes of padded tokens (mem_cache/memory_pool.py: size + page_size slots; allocator.py: free "
                     "pages from 1)")


def sglang_pool_caps(pool_tokens: int, max_model_len: int, max_req_len: int) -> str:
    """SGLang starting with a pool shorter than the context: plan's served_at_lower_len (``advice_sglang_len``)."""
    return (f"SGLang starts with a KV pool of {pool_tokens:,} tokens, fewer than max_model_len {max_model_len:,}, and "
            f"serves at a lower length (kvledger plan's verdict served_at_lower_len; vLLM refuses to start): "
            f"max_req_len = min(context_len − 1, pool − 1) = {max_req_len:,}, so prompts ≥ {max_req_len - 5:,} tokens "
            f"(max_req_input_len) are aborted and outputs are capped at max_req_len − prompt − 1 (SGLang "
            "managers/tp_worker.py in every release 0.4.0–0.5.23, which 0.5.23 also warns of; managers/utils.py "
            "validate_input_length, scheduler.py init_req_max_new_tokens)")


SGLANG_MAMBA_SLOTS = ("; the simulator does not hold these slots per request (only max_running_requests limits the "
                      "requests running)")
SGLANG_SLIDING_POOL = ("; the simulator holds every token of a request in the full pool and does not model the "
                       "sliding-window pool, which SGLang frees outside the window")


# --- settings and layouts ---------------------------------------------------------------------------------------------

RELEASE_RULES = " rules (--engine-version): "
"""What every ``sglang_release_rules`` note holds (calibrate prints those notes, ``engine_assumptions``)."""


def sglang_release_rules(version: str, defaults: Any, capture_read: bool) -> str:
    """What of an older SGLang release (``--engine-version``) the replay applies, each rule with its source file;
    ``defaults``: its ``sglang_rules.SglangDefaults`` on this GPU and TP."""
    d = defaults
    graphs = ("decode batches padded to its captured CUDA-graph sizes (model_executor/cuda_graph_runner.py), eager "
              "and unpadded above cuda_graph_max_bs" if capture_read else "its CUDA-graph capture list was not "
              "modelled: decode steps priced unpadded")
    return (f"SGLang {version}{RELEASE_RULES}its defaults mem_fraction_static {d.mem_fraction_static:g}, "
            f"chunked_prefill_size {d.chunked_prefill_size:,}, cuda_graph_max_bs {d.cuda_graph_max_bs} "
            "(server_args.py ServerArgs.__post_init__; a flag given wins), its KV pool (model_runner.py "
            "profile_max_num_token) and max_running_requests (model_runner.py init_memory_pool, managers/tp_worker.py);"
            f" {graphs}; overlap scheduling on (server_args.py disable_overlap_schedule False); the scheduler's "
            "constants as read in 0.4.0–0.4.6 and 0.5.23, the same in each (schedule_conservativeness 1.0, "
            "server_args.py; new_token_ratio 0.7, floor × 0.14, 600 decay steps, 20 retract steps, global_config.py; "
            "4,096-token clip, managers/schedule_policy.py)")


def policy_preset(policy: str, fields: dict[str, Any]) -> str:
    return f"policy preset {policy!r}: {fields}"


def v0_engine_by_default(version: str) -> str:
    return (f"vLLM {version} ran the V0 engine by default (V1 became the default in 0.8): this run schedules by the v1 "
            "rule with that version's memory plan; --batching vllm_v0 models V0's prefill-first rule")


def async_scheduling(on: bool, why: str) -> str:
    """The engine's scheduling mode and why; on, what it does to a light load's TTFT (docs/engine-model.md §2.9)."""
    said = f"async scheduling {'on' if on else 'off'}: {why}"
    return said + ("; the scheduler plans step k + 1 while step k runs, so an arrival joins at step k + 2, a step "
                   "later than a synchronous engine's (about one step more TTFT at light load), while the CPU time "
                   "hides under the GPU's" if on else "")


HYBRID_LAYOUT = "hybrid / sliding-window KV layout: blocks per request from the plan's KV cache groups"


def sliding_prefill_chunk(inflight_tokens: int) -> str:
    return ("sliding-window groups hold a prefill chunk's blocks until the next step and admit on "
            f"max_admission_blocks_per_request (in-flight tokens {inflight_tokens:,}; "
            "v1/core/single_type_kv_cache_manager.py, config/vllm.py max_in_flight_tokens)")


# --- how a run went ---------------------------------------------------------------------------------------------------

OVERLOAD_ADVICE_SIMULATE = ("lower the rate (--rate/--rate-scale), add replicas, or size for it with "
                            "`goodput --simulate --target`")
"""What ``simulate`` (whose flags these are) advises for an overloaded open loop."""
OVERLOAD_ADVICE_MEASURED = ("latency errors then measure the queue: compare throughput, or check latency on a run "
                            "measured at a load the engine sustained (a lower request rate or concurrency in the "
                            "benchmark); `goodput --simulate --target` finds that load")
"""What ``validate`` (a measured run, replayed: it has no rate flag) advises for an overloaded run."""
ATTAINMENT_CEILING = "near the attainment ceiling: "
"""How the warning of a capacity set by the requests that miss at any load begins (``attainment_ceiling``)."""
ITL_BUDGET = "ITL set by the token budget: "
"""How the warning of an ITL limit a step carrying a full prefill chunk exceeds at any load begins (``itl_budget``)."""
CAPACITY_WARNINGS = ("not steady: ", "unrepresentative sample: ", ATTAINMENT_CEILING, ITL_BUDGET)
"""The SLO-capacity notes every command shows as warnings, not among the notes: the boundary probe's queue still
growing (``queue_growth.not_steady_note``), probes replaying a window unlike their trace (``probe_sample``), a target
near the attainment the workload reaches at light load (``attainment_ceiling``), an ITL limit below a full-budget
step (``itl_budget``)."""

OVERLOAD_ADVICE_CAPACITY = ("at the SLO capacity's probe this means the probe ended before its queue cost the SLO, so "
                            "the capacity found is optimistic: rerun with more requests per probe (--num-requests)")
"""What an SLO-capacity search (``report``, ``cost --simulate``, ``goodput --simulate``) advises for its boundary
probe's overload; the commands' not-steady warning says the same at more length."""


def expected_clause(backlog_mid: int, expected: float | None, allowance: float | None = None,
                    backlog_last: int | None = None, z: float | None = None) -> str:
    """ ", past the 112 they would number had the engine kept pace …" when the rate-scaled backlog differs from the
    median's (a backlog is what the run held, not what a kept-up engine holds: this one scaled by the rate); with
    ``allowance`` (``z`` × √(D × expected)) and ``backlog_last``, whether the excess is within what the trace's own
    bursts can add."""
    out = ""
    if expected is not None and abs(expected - backlog_mid) >= 0.5:
        out = (f", past the {expected:,.0f} they would number had the engine kept pace from the median arrival on (the "
               f"{backlog_mid:,} there × {expected / backlog_mid:.2f}, the arrival rate's change between the halves)")
    if expected is None or allowance is None or backlog_last is None or z is None:
        return out
    excess = backlog_last - expected
    # "it": the expected backlog named above, or, where the rate did not change it, named here (a fresh-user trial
    # read "— 132 past it" with nothing before it to point to)
    it = "it" if out else (f"where an engine keeping pace from the median arrival on would have held them "
                           f"({expected:,.0f}: the arrival rate did not change between the halves)")
    if within_bursts(backlog_last, expected, allowance):
        return (out + f" — {excess:,.0f} past {it}, within the {allowance:,.0f} the trace's own bursts can add "
                f"({z:g} × √(D × the expected backlog), D the arrivals' dispersion), so a capacity search does not "
                "count this load out; a longer run tells whether it keeps up")
    return out + f" — {excess:,.0f} past {it}, beyond the {allowance:,.0f} the trace's own bursts can add"


def within_bursts(last: int, expected: float | None, allowance: float | None) -> bool:
    """Whether a backlog's excess over the expected one (``last`` − ``expected``) is within ``allowance``, what the
    trace's own bursts can add; False when either is unknown. One rule for the notes' words and
    ``overloads.QueueGrowth.within_bursts``."""
    return expected is not None and allowance is not None and last - expected <= allowance


def _heading(last: int, expected: float | None, allowance: float | None) -> str:
    """"overloaded" when the growth is past what the trace's own bursts can add (or that is not known), else "queue
    growing": an excess within the bursts' allowance is not a verdict (``expected_clause``)."""
    return "queue growing" if within_bursts(last, expected, allowance) else "overloaded"


def overloaded(backlog_mid: int, t_mid_s: float, backlog_last: int, t_last_s: float, arrived_per_s: float,
               finished_per_s: float, advice: str = OVERLOAD_ADVICE_SIMULATE, expected: float | None = None,
               allowance: float | None = None, z: float | None = None) -> str:
    return (f"{_heading(backlog_last, expected, allowance)}: requests in the system (arrived, not finished) grew "
            f"from {backlog_mid:,} at the median arrival (t = {t_mid_s:,.1f} s) to {backlog_last:,} at the last one "
            f"(t = {t_last_s:,.1f} s)"
            f"{expected_clause(backlog_mid, expected, allowance, backlog_last, z)}; over that "
            f"time {arrived_per_s:,.2f} req/s arrived and {finished_per_s:,.2f} req/s finished, so the queue grows "
            f"with the trace and TTFT measures it, not the engine (kvledger.analyses.serving.queue_growth): {advice}")


def overloaded_waiting(waiting_mid: int, t_mid_s: float, waiting_last: int, t_last_s: float, arrived_per_s: float,
                       started_per_s: float, advice: str = OVERLOAD_ADVICE_SIMULATE,
                       expected: float | None = None, allowance: float | None = None,
                       z: float | None = None) -> str:
    return (f"{_heading(waiting_last, expected, allowance)}: requests waiting for their first token grew from "
            f"{waiting_mid:,} at the median arrival (t = {t_mid_s:,.1f} s) to {waiting_last:,} at the last one "
            f"(t = {t_last_s:,.1f} s)"
            f"{expected_clause(waiting_mid, expected, allowance, waiting_last, z)}; over that time "
            f"{arrived_per_s:,.2f} req/s arrived and {started_per_s:,.2f} req/s got their first token, so the prefill "
            "does not keep up and TTFT measures the queue, not the engine — read in a run too short for the backlog "
            f"(kvledger.analyses.serving.queue_growth): {advice}")


def too_short(t_mid_s: float, t_last_s: float, first_finish_s: float, num_requests: int, enough: int) -> str:
    return (f"too short to tell whether the engine kept up: the arrivals up to the median spanned {t_mid_s:,.2f} s "
            f"(all {num_requests:,} of them {t_last_s:,.2f} s), less than the {first_finish_s:,.2f} s to the first "
            "finish, so the backlog had not left its warm-up, and the waiting queue did not grow "
            "(kvledger.analyses.serving.queue_growth): the latency and throughput are of the warm-up, not of a "
            f"sustained load; rerun with more requests (--num-requests; at least {enough:,} here)")


def sessions_overloaded(share: float, ttft_mean_s: float, threshold: float) -> str:
    return (f"overloaded: the turns spent {share:.0%} of their time in the system before their first token (Σ TTFT ÷ "
            f"Σ E2E, ≥ {threshold:.0%}; TTFT mean {ttft_mean_s:,.2f} s), so they queue and TTFT measures the queue, "
            "not the engine (kvledger.analyses.serving.queue_growth): lower --session-rate or --sessions, add "
            "replicas, or size for it with `search --workload chat|agent --session-rate R` (the session rate one "
            "replica sustains within the SLO, and the replicas for R; goodput --simulate takes no session workload)")


# --- pricing a sweep --------------------------------------------------------------------------------------------------

def sweep_without_load(where: str, labels: list[str]) -> str:
    listed = ", ".join(f"{i}: {label}" for i, label in enumerate(labels))
    verb = "hold" if where.endswith(" files") else "holds"  # "3 files hold …", "run.json holds …"
    return (f"{where} {verb} {len(labels)} runs ({listed}) that state no distinct request rate or concurrency, so the "
            "sweep's capacity cannot be found; choose one with --run INDEX")


def _attainments(attained: list[tuple[str, float, float]]) -> str:
    return "; ".join(f"{label} at {value:g}: {share:.1%}" for label, value, share in attained)


def sweep_misses_target(where: str, target: float, attained: list[tuple[str, float, float]]) -> str:
    return (f"no run of the sweep in {where} has {target:.0%} of its requests within the SLO "
            f"({_attainments(attained)}); there is no SLO capacity to price: loosen the SLO, or price one run with "
            "--run INDEX")


def sweep_capacity(index: int, label: str, value: float, axis: str, target: float,
                   attained: list[tuple[str, float, float]]) -> str:
    unit = "req/s" if axis == "request_rate" else "concurrent users"
    return (f"--run {index} ({label}, {value:g} {unit}) is the sweep's SLO capacity: the highest load up to which "
            f"every run has ≥ {target:.0%} of its requests within the SLO (attainment per run: "
            f"{_attainments(attained)})")


def max_len_low_end(est: int, low: int | None = None) -> str:
    """The clause vLLM's pool refusal gains from the plan's memory range (``kvledger plan`` prints the same pair);
    ``low`` None: the point estimate alone (the range gives no second length)."""
    if low is None:
        return f". The memory plan's point figure gives vLLM's estimate of {est:,} tokens (--max-model-len {est})"
    return (f". The memory plan's point figure gives vLLM's estimate of {est:,} tokens; at the low end of its range "
            f"{low:,} (--max-model-len {low}) is the length that starts for sure.")


def paced_behind(offered_per_s: float, sent_per_s: float, num_users: int, max_running: int | None = None) -> str:
    head = (f"the clients fell behind their rate: with {num_users:,} request{'s' * (num_users != 1)} in flight at most "
            f"they sent {sent_per_s:.4g} req/s of the {offered_per_s:.4g} offered (first to last send), the rest "
            "waiting at the client for a free slot, as `vllm bench serve --max-concurrency` does; latencies are timed "
            "from each send, so that wait is in none of them")
    if max_running is None:
        return (f"{head}, and the throughput is what {num_users:,} in flight drew (the engine's capacity only if it "
                "was saturated at that many)")
    if num_users <= max_running:
        return (f"{head}. The cap, not the engine, held the load: {num_users:,} in flight is within what the engine "
                f"runs at once (max_num_seqs × replicas = {max_running:,}), so the throughput is what they drew, not "
                "the engine's capacity (no band on it; --concurrency higher, or goodput --simulate --target, finds "
                "the capacity)")
    return (f"{head}. With more in flight than the engine runs at once (max_num_seqs × replicas = {max_running:,}), "
            "the engine queued: the throughput is its capacity at this load")
