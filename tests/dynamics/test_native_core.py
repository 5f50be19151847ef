"""The optional compiled core (dynamics/fast/stretch_core.c) gives every reported figure bit for bit what the
pure-Python fallback gives: the same simulations run both ways, in process and through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvledger.accounting.gemm_efficiency import gemm_curve
from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_steps import GraphPaddedStepCost, decode_capture_sizes
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.dynamics.engine.request import RequestSpec, plain_spec
from kvledger.dynamics.engine.request_state import SimRequest, accept
from kvledger.dynamics.fast import native, open_settle, sglang_settle
from kvledger.dynamics.outputs import exact_mean
from kvledger.dynamics.outputs.kv_usage import KvUsageTracker
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.dynamics.workload import columns
from kvledger.dynamics.workload.columns import WorkloadColumns

needs_core = pytest.mark.skipif(native.core is None, reason="the C core is not compiled here (no compiler at install, "
                                "or KVLEDGER_PURE_PYTHON=1): only the fallback runs")


def _all(res) -> str:
    return json.dumps(res.to_dict(include_records=True), sort_keys=True, default=str)


def _both_ways(monkeypatch, *args, **kw) -> tuple[str, str]:
    """Every reported figure of ``simulate(*args, **kw)`` with the compiled core and with the pure-Python fallback."""
    compiled = _all(simulate(*args, **kw))
    monkeypatch.setattr(native, "core", None)
    pure = _all(simulate(*args, **kw))
    monkeypatch.undo()
    return compiled, pure


def test_the_switch_turns_the_core_off(monkeypatch):
    monkeypatch.setenv("KVLEDGER_PURE_PYTHON", "1")
    assert native.load() is None
    monkeypatch.setenv("KVLEDGER_PURE_PYTHON", "0")  # "0" or unset: the core when it was compiled
    try:
        from kvledger.dynamics.fast import stretch_core
    except ImportError:  # not compiled here
        stretch_core = None
    assert native.load() is stretch_core


@needs_core
def test_the_core_is_the_version_its_callers_expect():
    assert native.core.VERSION == native.CORE_VERSION


@st.composite
def plain_workloads(draw):
    """Arrivals close together and far apart, prompts up to twice the budget, one-token outputs, some rejected."""
    n = draw(st.integers(1, 40))
    t, out = 0.0, []
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0005, 0.003, 0.01, 0.05, 0.3]))
        out.append(RequestSpec(f"q{i}", t, draw(st.sampled_from([1, 7, 16, 33, 100, 250, 520])),
                               draw(st.integers(1, 200))))
    return out


@needs_core
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(reqs=plain_workloads(), blocks=st.integers(33, 600), lag=st.booleans(), seats=st.sampled_from([3, 256]),
       per_token=st.sampled_from([0.0, 1e-5, 3e-4]), token_times=st.booleans())
def test_core_and_fallback_agree_on_every_reported_figure(monkeypatch, reqs, blocks, lag, seats, per_token,
                                                         token_times):
    # FixedStepCost has no plain decode form: the core asks prices.decode_list for every chunk; pools of 33 blocks
    # preempt and max_model_len 512 rejects the 520-token prompts, so every hand-over runs under both
    cfg = EngineConfig(num_gpu_blocks=blocks, block_size=16, max_model_len=512, async_scheduling=lag,
                       max_num_seqs=seats)
    compiled, pure = _both_ways(monkeypatch, reqs, cfg, FixedStepCost(0.004, per_token),
                                record_token_times=token_times)
    assert compiled == pure


@needs_core
@pytest.mark.parametrize("lag,curve", [(False, False), (True, False), (False, True)])
def test_the_roofline_run_is_the_same_with_and_without_the_core(monkeypatch, lag, curve):
    # Llama-3.1-8B on an H100, 800 arrivals at about 8 per second (fixed seed), columnar as the CLI runs it: the core
    # prices the decode steps in the roofline's plain form gemm + g·kv / bw and sums their end times in C; with the
    # measured GEMM curve it also divides each mixed step's matmul term by the token term's efficiency
    rng = np.random.default_rng(11)
    n = 800
    work = WorkloadColumns(np.cumsum(rng.exponential(1 / 8, n)), rng.integers(20, 3000, n), rng.integers(2, 600, n),
                           "r")
    cfg = EngineConfig(num_gpu_blocks=20000, block_size=16, max_model_len=8192, async_scheduling=lag)
    m, g = load_model("meta-llama/Llama-3.1-8B", allow_hub=False), get_gpu("H100")
    kv = build_plan(m, g, PlanSettings(), with_roofline=False, with_advice=False).kv
    cost = RooflineStepCost(m, g, kv, gemm_curve=gemm_curve(g.gpu_id) if curve else None)
    assert (cost.step_consts() is not False) and (cost.matmul_efficiency(384) < 1.0) == curve  # the plain form, both
    compiled, pure = _both_ways(monkeypatch, work, cfg, cost, record_token_times=False)
    assert compiled == pure


@needs_core
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from([0.0, 1e-4, 0.003, 0.5, 7.0, 3e4, 1e17]), st.floats(1e-5, 0.05),
                                st.integers(0, 10), st.integers(0, 160)), min_size=1, max_size=300))
def test_the_usage_fold_is_the_same_with_and_without_the_core(monkeypatch, steps):
    # steps far apart merge the time buckets (up to 1e17 s: past 2^63 buckets of the first width); the totals, the
    # maximum and every bucket's sums must be the same floats whichever path folds them
    def summary():
        tracker, t = KvUsageTracker(16), 0.0
        for gap, dur, used, stored in steps:
            t += gap
            tracker.add(t, dur, used, 10, stored, used * 16)
        return json.dumps([tracker.summary(t + 1.0), tracker.busy_s, tracker.stored_token_s, tracker.held_token_s])

    compiled = summary()
    monkeypatch.setattr(native, "core", None)
    pure = summary()
    monkeypatch.undo()  # the next example starts with the core again
    assert pure == compiled


class _Req:
    __slots__ = ("name", "num_prompt_tokens", "num_output_tokens", "num_computed_tokens", "num_generated",
                 "num_tokens")

    def __init__(self, name: str, prompt: int, output: int) -> None:
        self.name, self.num_prompt_tokens, self.num_output_tokens = name, prompt, output
        self.num_computed_tokens = self.num_generated = self.num_tokens = -1

    def state(self) -> tuple:
        return self.name, self.num_computed_tokens, self.num_generated, self.num_tokens


@needs_core
@pytest.mark.parametrize("lag", [0, 1])
def test_settle_lives_in_c_is_the_python_loop(lag):
    # K = 10 steps, blocks of 4 tokens; (request, d0, c0, held, m, admitted), first block-filling step j = held·4 − c0
    # from d0, blocks taken (end − j − 1) // 4 + 1 over its `end` steps here:
    #   "a" (5 computed in 2 blocks, 40 left) runs all 10: j = 3, 2 blocks from step 3; still running, 15 computed;
    #   "b" (4 in 1 block, 4 left) finishes after step 3: j = 0, 1 block from step 0; its 2 blocks freed from step 4;
    #   "c" admitted at step 2 (9-token prompt in 3 blocks, 8 left) finishes in step 9: j = 3, 2 blocks from step 5,
    #       takes 3 + 2; "d" (12 in 3 blocks, 1 left) decodes in step 9 and finishes: 1 block from step 9.
    # Finishing in the last step, c and d are freed in the stretch when synchronous, deferred under async.
    def lives():
        return [(_Req("a", 5, 50), 0, 5, 2, 40, False), (_Req("b", 3, 6), 0, 4, 1, 4, False),
                (_Req("c", 9, 9), 2, 9, 3, 8, True), (_Req("d", 2, 20), 9, 12, 3, 1, False)]

    py_lives, c_lives = lives(), lives()
    py = open_settle.settle_lives(py_lives, 10, 4, lag, 100)
    c = native.core.settle_lives(c_lives, 10, 4, lag, 100)

    def plain(x):
        return x.state() if isinstance(x, _Req) else tuple(plain(y) for y in x) if isinstance(x, tuple | list) else x

    assert plain(c) == plain(py)
    assert [life[0].state() for life in c_lives] == [life[0].state() for life in py_lives]
    assert c[1] == [3, 2, 0, 1, 5, 2, 9, 1] and c[2] == [4, 2]
    assert [(r.name, n) for r, n in c[0]] == [("a", 2), ("b", 1), ("c", 5), ("d", 1)]
    assert [r.name for r in c[5]] == (["b"] if lag else ["b", "c", "d"])
    assert [r.name for r in c[6]] == (["c", "d"] if lag else [])
    assert c_lives[0][0].state() == ("a", 15, 20, 25)


def _cli_json(env_extra: dict, *argv: str) -> bytes:
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-m", "kvledger.cli.main", "simulate", "meta-llama/Llama-3.1-8B", "--gpu",
                           "H100-SXM", *argv, "--json"], capture_output=True, env=env, check=True).stdout


@needs_core
@pytest.mark.parametrize("policy", ["vllm", "sglang"])
def test_the_command_line_prints_the_same_bytes_with_and_without_the_core(policy):
    # vLLM's rule runs open_stretch.py's arrival stretches (decode_until, arrive, settle_lives in C); SGLang's,
    # sglang_stretch.py's (sglang_decode_until, with CUDA-graph padded prices asked of prices.decode_list)
    argv = ("--trace", "azure-conv", "--num-requests", "3000", "--policy", policy)
    assert _cli_json({}, *argv) == _cli_json({"KVLEDGER_PURE_PYTHON": "1"}, *argv)


# ---- SGLang's arrival stretches in C: sglang_run (gathering, prefill step), sglang_replay (the radix cache's replay
# with admit_fresh, free_fresh, add_slots and _evict), sglang_decode_grants; each against its Python, kept

SGL = dict(batching="sglang", prefix_caching_policy="sglang", block_size=1)


@needs_core
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(reqs=plain_workloads(), pool=st.sampled_from([600, 700, 900, 1500, 4000, 12000]),
       seats=st.sampled_from([3, 256]), budget=st.sampled_from([64, 600, 8192]),
       per_token=st.sampled_from([0.0, 1e-5, 3e-4]), token_times=st.booleans())
def test_sglang_stretches_agree_with_and_without_the_core(monkeypatch, reqs, pool, seats, budget, per_token,
                                                          token_times):
    # pools of 600-900 tokens fill up: admissions evict the least-recently-used leaves (the replay's _evict), some
    # arrivals wait and hand over to the general step; max_model_len 512 rejects the 520-token prompts (records
    # through out.extend); a 64-token budget refuses batches; FixedStepCost has no plain form: the core calls
    # the prefill step's price through StepShape
    cfg = EngineConfig(num_gpu_blocks=pool, max_model_len=512, max_num_seqs=seats, max_num_batched_tokens=budget,
                       **SGL)
    compiled, pure = _both_ways(monkeypatch, reqs, cfg, FixedStepCost(0.004, per_token),
                                record_token_times=token_times)
    assert compiled == pure


@needs_core
@pytest.mark.parametrize("pool", [30000, 300000])
def test_the_sglang_roofline_run_is_the_same_with_and_without_the_core(monkeypatch, pool):
    # Llama-3.1-8B on an H100 as the CLI prices SGLang (the roofline under CUDA-graph padding: the core prices each
    # prefill step by the wrapped roofline's plain form), 800 arrivals at about 8 per second (fixed seed); a pool of
    # 30,000 tokens evicts cached leaves at most admissions, 300,000 at few
    rng = np.random.default_rng(5)
    n = 800
    work = WorkloadColumns(np.cumsum(rng.exponential(1 / 8, n)), rng.integers(20, 3000, n), rng.integers(2, 600, n),
                           "r")
    cfg = EngineConfig(num_gpu_blocks=pool, max_model_len=8192, **SGL)
    m, g = load_model("meta-llama/Llama-3.1-8B", allow_hub=False), get_gpu("H100")
    inner = RooflineStepCost(m, g, build_plan(m, g, PlanSettings(), with_roofline=False, with_advice=False).kv)
    cost = GraphPaddedStepCost(inner, decode_capture_sizes(256))
    compiled, pure = _both_ways(monkeypatch, work, cfg, cost, record_token_times=False)
    assert compiled == pure
    res = simulate(work, cfg, cost, record_token_times=False)
    assert pool > 30000 or res.to_dict()["summary"]["num_finished"] == n  # everyone served, evictions or not


@needs_core
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(quads=st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 40), st.integers(0, 10**6),
                                st.integers(0, 300)), max_size=30))
def test_the_decode_grants_in_c_are_the_numpy_ones(monkeypatch, quads):
    # (first step, steps, tokens, requests): pieces with requests (decode steps) give one (step, requests) pair a step;
    # prefill steps (requests 0) give none
    stored = [x for q in quads for x in q]
    compiled = sglang_settle._decode_grants(stored)
    with monkeypatch.context() as m:
        m.setattr(native, "core", None)
        pure = sglang_settle._decode_grants(stored)
    assert compiled == pure
    assert compiled == [x for f, k, _, r in quads if r for s in range(k) for x in (f + s, r)]  # by hand


@needs_core
@settings(max_examples=150, deadline=None)
@given(p=st.integers(0, 700), o=st.integers(0, 700), max_len=st.sampled_from([1, 512, 520]), caps=st.booleans(),
       max_req=st.sampled_from([None, 6, 300, 512]))
def test_accept_in_c_builds_the_request_python_builds(p, o, max_len, caps, max_req):
    # a served request is built by the core field by field (SimRequest.__init__'s order: every slot equal, the
    # spec's own objects kept); a refused one is the Python accept's record: prompt ≥ max_model_len (vLLM v1's
    # capped outputs), prompt + output > max_model_len (V0), SGLang's prompt ≥ max_req_len − 5 and its output cap
    # at max_req_len − 1 − prompt
    spec = RequestSpec("r", 2.5, p, o)
    made = native.core.accept(accept, SimRequest, 11, spec, (0, 0, max_len, caps, max_req))
    ref = accept(11, spec, max_len, caps, max_req)
    assert type(made) is type(ref)
    if type(ref) is SimRequest:
        for name in SimRequest.__slots__:
            assert getattr(made, name) == getattr(ref, name), name
        assert made.spec is spec and made.num_prompt_tokens is spec.num_prompt_tokens and made.runs is not ref.runs
        cap = max_req - 1 if max_req is not None else max_len if caps else None
        assert made.num_output_tokens == (o if cap is None or p + o <= cap else cap - p)  # by hand
    else:
        assert made == ref


@needs_core
def test_a_type_with_its_own_setattr_is_written_through_it():
    # the core writes __slots__ fields in place only for types with the generic setattr: a subclass defining
    # __setattr__ sees every field of SimRequest.__init__ go through it, in order, with the same values
    seen = []

    class Watched(SimRequest):
        __slots__ = ()

        def __setattr__(self, name, value):
            seen.append(name)
            object.__setattr__(self, name, value)

    made = native.core.accept(accept, Watched, 3, RequestSpec("w", 0.5, 10, 20), (0, 0, 512, True, None))
    assert seen == list(SimRequest.__slots__) and type(made) is Watched
    assert [getattr(made, n) for n in SimRequest.__slots__] == [getattr(accept(3, made.spec, 512, True), n)
                                                                 for n in SimRequest.__slots__]


@needs_core
@settings(max_examples=100, deadline=None)
@given(rid=st.text(max_size=8), t=st.floats(0, 1e6), p=st.integers(0, 10**6), o=st.integers(0, 10**6))
def test_the_compiled_plain_spec_is_the_python_one(rid, t, p, o):
    # request.plain_spec by the core (stretch_core.new_spec, what WorkloadColumns builds its specs with): the same
    # frozen RequestSpec, field by field, equal to the dataclass's own constructor with its defaults (no segments,
    # 512-token segments, no client)
    made, ref = columns.new_spec(rid, t, p, o), plain_spec(rid, t, p, o)
    assert type(made) is RequestSpec and made == ref == RequestSpec(rid, t, p, o)
    assert made.request_id is rid and made.prefix_segments == () and made.segment_tokens == 512


@pytest.mark.skipif(not hasattr(native.core, "exact_total"), reason="no compiled core, or no 128-bit integers")
@settings(max_examples=120, deadline=None)
@given(vals=st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=300),
       wide=st.sampled_from([None, np.int32, np.int64]), seed=st.integers(0, 2**32 - 1))
def test_the_exact_total_in_c_is_the_python_integer(vals, wide, seed):
    # Σ values·counts × 2^1127 as an exact integer: every finite double (subnormals, ±0, the largest, mixed signs
    # and binades) with no count, int32 counts below 2^16 and int64 counts up to 2^31 − 1; against the Python
    # integer and, for the sum itself, Fractions
    v = np.array(vals, dtype=np.float64)
    rng = np.random.default_rng(seed)
    c = None if wide is None else rng.integers(0, 2**16 if wide is np.int32 else 2**31, len(v)).astype(wide)
    made = native.core.exact_total(v, c)
    assert made == exact_mean._exact_total(v, c)
    ones = [1] * len(v) if c is None else c.tolist()
    assert Fraction(made, 2**1127) == sum(Fraction(x) * k for x, k in zip(vals, ones))  # by definition
