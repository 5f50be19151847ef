"""What --disable-custom-all-reduce, --enforce-eager, --distributed-executor-backend and --sampler-backend change in
vLLM's memory terms, version by version (issue 20's fresh-user trial; vllm_flag_terms.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_collectives import non_torch_term
from kvledger.accounting.vllm_flag_terms import ca_bytes_in_window
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.cli.main import app
from kvledger.units import GiB, MiB

L8, L70 = "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B"


@pytest.mark.parametrize("ver,counted", [
    ((0, 6, 3), 24),   # worker.py: init_gpu_memory before init_distributed_environment: all 3 buffers grow the device
    ((0, 6, 4), 24),   # worker.py 0.6.4.post1: all non-torch memory (meta + buffer) + torch peak (rank_data current)
    ((0, 6, 6), 24),   # worker.py: used − baseline − weights − Δtorch during the profile: rank_data lands in non-torch
    ((0, 7, 3), 16),   # MemorySnapshot baseline before the set-up: non-torch = cuda − torch reserved, so meta + buffer
    ((0, 8, 5), 24),   # v1 gpu_worker.py: all non-torch on the device + torch peak (rank_data is current at the reset)
    ((0, 9, 2), 16), ((0, 10, 2), 16),  # init_snapshot before init_worker_distributed_environment: meta + buffer
    ((0, 11, 0), 0), ((0, 19, 0), 0),  # init_snapshot after it ("Initialize the distributed environment BEFORE")
])
def test_custom_all_reduce_bytes_each_version_counts(ver, counted):
    # max_size 8 MiB: meta = meta_size() + 8 MiB (meta_size a few KiB, not counted), buffer 8 MiB, rank_data 8 MiB.
    assert ca_bytes_in_window(ver, 8 * MiB)[0] == counted * MiB


@pytest.mark.parametrize("gpu,tp,ver", [
    ("h100", 4, (0, 6, 3)), ("h100", 4, (0, 8, 5)), ("h100", 4, (0, 10, 2)), ("h100", 4, (0, 11, 0)),
    ("h100", 8, (0, 19, 0)), ("h200", 8, (0, 6, 3)), ("h100", 2, (0, 16, 0)), ("l40s", 2, (0, 10, 2)),
    ("a100-80gb-sxm", 4, (0, 8, 5))])
def test_disable_custom_all_reduce_takes_off_only_the_counted_buffers(gpu, tp, ver):
    # One rule on every basis (measured or not): off = on − what the version counts of the buffers, point and range.
    g = resolve_gpu(gpu)
    on, off = non_torch_term(ver, tp, 1, 1, g, False), non_torch_term(ver, tp, 1, 1, g, True)
    ca = ca_bytes_in_window(ver, 8 * MiB if ver < (0, 11, 0) else 0)[0]
    assert (on.bytes - off.bytes, on.low - off.low, on.high - off.high) == pytest.approx((ca, ca, ca))


def test_trial_commands_disable_custom_all_reduce():
    # Issue 20's trial: Llama-3.1-70B, H100, TP 4, 0.11.0 gave non-torch 0.80 (0.74–1.82) and KV 32.76 GiB, and
    # 2.11 (0.16–2.41) / 31.46 with the flag (the H100 0.19 log2 rule: 2.13 − 24 MiB). 0.11.0 allocates the buffers
    # before its init snapshot, so the flag changes nothing: 0.80 (0.74–1.82) both ways, H200-measured.
    h100 = resolve_gpu("h100")
    for flag in (False, True):
        t = non_torch_term((0, 11, 0), 4, 1, 1, h100, flag)
        assert (t.bytes / GiB, t.low / GiB, t.high / GiB) == pytest.approx((0.80, 0.74, 1.82))
    # 0.19 TP 8 (Llama-3.1-8B): 2.53 (the H200 TP-8 row) both ways; the flag used to remove 0.35 GiB.
    assert non_torch_term((0, 19, 0), 8, 1, 1, h100, True).bytes == non_torch_term((0, 19, 0), 8, 1, 1, h100,
                                                                                   False).bytes == 2.53 * GiB
    # 0.6.3 counts the 24 MiB the H200 rows (0.11.2–0.16.0) do not, and NCCL's start-up (vllm_nccl_init.py: NCCL 2.20
    # connects ring + tree at init, 3 buffer sets a channel at TP 4 × 16 channels × 9.1875 MiB = 441 MiB): on
    # 0.80 GiB + 24 + 441 MiB, off 0.80 GiB + 441 MiB (the flag takes off custom all-reduce only).
    t = non_torch_term((0, 6, 3), 4, 1, 1, h100, False)
    assert t.bytes == pytest.approx(0.80 * GiB + 465 * MiB) and "24 MiB" in t.source and "441 MiB" in t.source
    assert non_torch_term((0, 6, 3), 4, 1, 1, h100, True).bytes == pytest.approx(0.80 * GiB + 441 * MiB)


def test_enforce_eager_moves_the_point_from_0_18():
    # 0.19 --enforce-eager: no profile_cudagraph_memory in the window (gpu_worker.py) and no torch.compile
    # (config/vllm.py mode NONE), so the pre-0.18 H100 TP-1 figure 0.13 ± 0.02 GiB, not 0.25. Llama-3.1-8B on H100 at
    # 0.19 defaults: available KV 0.12 GiB more than with graphs (0.25 − 0.13; the 0.20+ estimate is not subtracted
    # before 0.20 either way).
    m, g = load_model(L8), resolve_gpu("h100")
    eager, graphs = (build_plan(m, g, make_settings(engine_version="0.19.0", enforce_eager=e), with_roofline=False,
                                with_advice=False).memory for e in (True, False))
    nt = next(d for d in eager.deductions if d.name == "non-torch memory")
    assert (nt.bytes / GiB, nt.low_bytes / GiB, nt.high_bytes / GiB) == pytest.approx((0.13, 0.11, 0.15))
    assert (eager.available_kv_bytes - graphs.available_kv_bytes) / GiB == pytest.approx(0.12, abs=1e-6)


def _plan_json(*args: str) -> dict:
    r = CliRunner().invoke(app, ["plan", *args, "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stdout
    return json.loads(r.stdout)


def test_executor_backend_says_what_it_changes():
    # ray/mp change no term in any version read: the note says so, with the files; with PP under Ray the compiled
    # graph's channel is built at the first step (ray_executor.py: forward_dag compiled in execute_model), after sizing.
    notes = _plan_json(L8, "--gpu", "H100", "--tp", "2", "--engine-version", "0.11.0",
                       "--distributed-executor-backend", "ray")["memory"]["notes"]
    assert any(n.startswith("ray: no memory term changes in vLLM 0.11.0") for n in notes)
    notes = _plan_json(L8, "--gpu", "H100", "--tp", "2", "--pp", "2", "--engine-version", "0.19.0",
                       "--distributed-executor-backend", "ray")["memory"]["notes"]
    assert any("compiled graph" in n and "after the KV pool is sized" in n for n in notes)
    notes = _plan_json(L8, "--gpu", "H100", "--tp", "2", "--engine-version", "0.6.3",
                       "--distributed-executor-backend", "mp")["memory"]["notes"]
    assert any(n.startswith("mp: no memory term changes in vLLM 0.6.3") and "driver worker" in n for n in notes)
    r = CliRunner().invoke(app, ["plan", L8, "--gpu", "H100", "--tp", "2", "--distributed-executor-backend", "ray"])
    assert ", executor ray, max_model_len" in " ".join(r.stdout.split())


def test_v0_flashinfer_sampler_modelled_from_0_5_5_refused_before():
    # 0.6.3 with VLLM_USE_FLASHINFER_SAMPLER=1: sampler.py skips the sort; live at the peak the bf16 logits (2 B) and
    # three fp32 copies (logits, probs, logprobs): 256 reqs × 128,256 × 14 B = 459,669,504 + hidden 512 × 4,096 × 2 B
    # = 4,194,304 + 0.05 GiB fixed (53,687,091) = 517,550,899 B (0.48 GiB; the sort point is 1.21 GiB).
    d = _plan_json(L8, "--gpu", "H100", "--engine-version", "0.6.3", "--sampler-backend", "flashinfer")
    act = next(x for x in d["memory"]["deductions"] if x["name"] == "activation peak")
    assert act["bytes"] == pytest.approx(459_669_504 + 4_194_304 + int(0.05 * GiB))
    assert "V0 FlashInfer" in act["source"]
    proc = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "plan", L8, "--gpu", "H100", "--engine-version",
                           "0.5.4", "--sampler-backend", "flashinfer"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "arrived in 0.5.5" in " ".join(proc.stderr.split())
