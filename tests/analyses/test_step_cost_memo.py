"""``step_cost_memo.kept_step_cost``: a capacity search's probes (the same arguments at another rate) share one step
cost, priced exactly as one built anew; any other argument, the plan or a file's change builds another."""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting.stepcost import StepShape
from kvledger.analyses.serving.sim_setup import SimRequestArgs, load_plan, make_step_cost
from kvledger.analyses.serving.step_cost_memo import kept_step_cost

SHAPES = [StepShape(num_decode_seqs=n, decode_kv_tokens=n * kv) for n in (1, 37, 256) for kv in (100, 3000)] + [
    StepShape(num_prefill_tokens=t, num_prefill_seqs=1, prefill_kv_tokens=t, prefill_attn_pairs=t * (t + 1) / 2,
              num_decode_seqs=20, decode_kv_tokens=20 * 900) for t in (17, 512, 2048)]


def _args(**kw) -> SimRequestArgs:
    return SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", max_model_len=4096, num_requests=50, **kw)


def test_probes_share_the_cost_and_price_as_a_fresh_one():
    a = _args(rate=2.0)
    plan, _ = load_plan(a)
    c1, i1 = kept_step_cost(a, plan, False, "continuous")
    for s in SHAPES:
        c1.step_time_s(s)  # fill its caches
    c2, i2 = kept_step_cost(replace(a, rate=9.5), plan, False, "continuous")
    fresh, info = make_step_cost(replace(a, rate=9.5), plan, overlap_cpu=False, batching="continuous")
    assert c2 is c1 and i2 == info == i1 and i2 is not i1  # each run gets its own description to add to
    assert [c2.step_time_s(s) for s in SHAPES] == [fresh.step_time_s(s) for s in SHAPES]
    assert c2.decode_steps_list(37, 37 * 500, 120) == fresh.decode_steps_list(37, 37 * 500, 120)
    i2.setdefault("warnings", []).append("x")
    assert kept_step_cost(a, plan, False, "continuous")[1] == info


def test_another_argument_plan_or_engine_rule_builds_anew():
    a = _args(rate=2.0)
    plan, _ = load_plan(a)
    c1, _ = kept_step_cost(a, plan, False, "continuous")
    assert kept_step_cost(a, plan, True, "continuous")[0] is not c1
    assert kept_step_cost(replace(a, seed=7), plan, False, "continuous")[0] is not c1
    b = _args(rate=2.0, gpu_profile="none")
    assert kept_step_cost(b, load_plan(b)[0], False, "continuous")[0] is not c1
    other_plan, _ = load_plan(_args(rate=2.0, max_num_seqs=64))
    assert kept_step_cost(a, other_plan, False, "continuous")[0] is not c1


def test_a_rewritten_file_builds_anew(tmp_path):
    f = tmp_path / "w.txt"
    f.write_text("1")
    a = _args(rate=1.0, trace=str(f))
    plan, _ = load_plan(a)
    c1, _ = kept_step_cost(a, plan, False, "continuous")
    import os

    st = os.stat(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert kept_step_cost(a, plan, False, "continuous")[0] is not c1
