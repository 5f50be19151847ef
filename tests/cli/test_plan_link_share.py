"""``plan --allreduce-link-share X`` and a GPU profile's fitted share: the roofline section's TP all-reduces priced at
that share of the link (the prefill chunk's "+ TP all-reduces" and the decode table), named on the "roofline priced
by" line and in ``roofline.priced_by``; the flag wins over the profile's share; the default (0.35 over PCIe) unchanged.

Worked by hand from ``accounting/tp_comm.py`` for Llama-3.1-8B (hidden 4,096, 32 layers) at TP 2 on two RTX 4090s:
the host link is PCIe Gen4 x16, 64 GB/s both ways (catalog), 32 GB/s a direction; the 4090 has no peer access, so
vLLM's custom all-reduce is off and every call is NCCL's: ``latency + 2(n − 1)/n · S / link``, two calls a layer
(64 a step). The latency is the A100 fit at 2 ranks (an sm8x GPU), 53.10176 µs. The plan's prefill chunk is 2,048
tokens: S = 2,048 × 4,096 × 2 B = 16,777,216 B.

* default, 0.35 × 32 GB/s = 11.2 GB/s: 64 × (53.10176 µs + 16,777,216 / 11.2e9 s) = 64 × 1,551.06747 µs = 99.26832 ms
* --allreduce-link-share 0.7, 22.4 GB/s: 64 × (53.10176 µs + 748.98286 µs) = 51.33342 ms
* a profile's 0.5, 16 GB/s: 64 × (53.10176 µs + 1,048.576 µs) = 70.50739 ms
* a decode step of one sequence moves S = 4,096 × 2 = 8,192 B a call: 64 × 8,192 × (1/11.2e9 − 1/22.4e9) s =
  23.4057 µs less at 0.7 than at 0.35 (two sequences: twice that).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_run import MODEL, refused, run_cli

GPU = "RTX 4090"
GPU_NAME = "NVIDIA GeForce RTX 4090"
PREFILL_DEFAULT_S = 64 * (53.10176e-6 + 16_777_216 / 11.2e9)  # 99.26832 ms
PREFILL_07_S = 64 * (53.10176e-6 + 16_777_216 / 22.4e9)  # 51.33342 ms
PREFILL_05_S = 64 * (53.10176e-6 + 16_777_216 / 16e9)  # 70.50739 ms
DEFAULT_RULE = ("TP all-reduces over PCIe at 35% of the host link's 32 GB/s a direction (range 20%–65%, from NCCL and "
                "one-shot all-reduces measured over PCIe: accounting/tp_comm.py)")
GIVEN_07 = ("TP all-reduces over PCIe at 70% of the host link's 32 GB/s a direction (given by --allreduce-link-share; "
            "the default rule 35%, range 20%–65%)")


def _plan(*extra: str) -> dict:
    res = run_cli("plan", MODEL, "--gpu", GPU, "--tp", "2", *extra, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _profile(tmp_path, share: float | None) -> str:
    p = tmp_path / "rtx4090.json"
    p.write_text(json.dumps({"kind": "kvledger-gpu-profile", "version": 4, "gpu": GPU_NAME, "flops_fraction": 0.7,
                             "bandwidth_fraction": 0.8, "allreduce_link_share": share}))
    return str(p)


def test_the_prefill_chunk_and_decode_steps_take_the_given_share_and_the_default_is_unchanged():
    base, given = _plan(), _plan("--allreduce-link-share", "0.7")
    assert base["roofline"]["prefill"]["chunk_tokens"] == given["roofline"]["prefill"]["chunk_tokens"] == 2048
    assert base["roofline"]["prefill"]["allreduce_s"] == pytest.approx(PREFILL_DEFAULT_S, rel=1e-6)
    assert given["roofline"]["prefill"]["allreduce_s"] == pytest.approx(PREFILL_07_S, rel=1e-6)
    assert PREFILL_DEFAULT_S * 1e3 == pytest.approx(99.26832, abs=1e-5)  # the hand figures above
    assert PREFILL_07_S * 1e3 == pytest.approx(51.33342, abs=1e-5)
    (b1, b2), (g1, g2) = base["roofline"]["decode"][:2], given["roofline"]["decode"][:2]
    assert (b1["batch"], b2["batch"], b1["context_tokens"]) == (g1["batch"], g2["batch"], g1["context_tokens"]) == \
        (1, 2, 2048)
    one = 64 * 8192 * (1 / 11.2e9 - 1 / 22.4e9)  # 23.4057 µs
    assert b1["step_s"] - g1["step_s"] == pytest.approx(one, rel=1e-6)
    assert b2["step_s"] - g2["step_s"] == pytest.approx(2 * one, rel=1e-6)
    # the bundled RTX 4090 profile (no share) priced it before: priced_by names it as simulate's does, and the link
    # terms are simulate's keys — the PCIe rule's default share with its range, or the given one with its source; the
    # settings' JSON keeps its old keys unless a share is set
    assert base["roofline"]["priced_by"].startswith("gpu: GPU profile bundled:rtx-4090.json (fitted on ")
    assert given["roofline"]["priced_by"] == base["roofline"]["priced_by"]
    assert "allreduce_link_share" not in base["settings"]
    assert (base["roofline"]["allreduce_link_share"], base["roofline"]["allreduce_link_share_range"]) == (0.35,
                                                                                                          [0.2, 0.65])
    assert base["roofline"]["allreduce_link_share_source"] == "the default rule over PCIe (kvledger.accounting.tp_comm)"
    assert (given["roofline"]["allreduce_link_share"], given["roofline"]["allreduce_link_share_source"]) == (
        0.7, "given by --allreduce-link-share")
    assert given["settings"]["allreduce_link_share"] == 0.7


def test_the_text_says_so_on_the_roofline_priced_by_line():
    out = " ".join(run_cli("plan", MODEL, "--gpu", GPU, "--tp", "2", "--allreduce-link-share", "0.7",
                           "--gpu-profile", "none", "--verbose").output.split())
    # no profile: the line is the link's alone; the prefill chunk's line (--verbose) carries the 51.33 ms
    assert f"roofline priced by: {GIVEN_07}" in out
    assert "+ TP all-reduces 51.33 ms" in out
    plain = " ".join(run_cli("plan", MODEL, "--gpu", GPU, "--tp", "2", "--gpu-profile", "none").output.split())
    assert f"roofline priced by: {DEFAULT_RULE}" in plain  # was: the default share unsaid (fresh-user trial)
    nvlink = " ".join(run_cli("plan", MODEL, "--gpu", "H100", "--tp", "2", "--allreduce-link-share",
                              "0.5").output.split())
    assert ("TP all-reduces at 50% of the scale-up link's 450 GB/s a direction (given by --allreduce-link-share; by "
            "default the catalog's figure, 100%)") in nvlink
    assert "TP all-reduces" not in run_cli("plan", MODEL, "--gpu", "H100", "--tp", "2").output  # the catalog's link


def test_a_profiles_share_prices_the_plan_and_the_flag_wins_over_it(tmp_path):
    prof = _profile(tmp_path, 0.5)
    fitted = _plan("--gpu-profile", prof)
    assert fitted["roofline"]["prefill"]["allreduce_s"] == pytest.approx(PREFILL_05_S, rel=1e-6)  # 70.50739 ms
    assert fitted["roofline"]["allreduce_link_share"] == 0.5
    assert fitted["roofline"]["allreduce_link_share_source"].startswith("the GPU profile's fit on its TP > 1 runs")
    text = " ".join(run_cli("plan", MODEL, "--gpu", GPU, "--tp", "2", "--gpu-profile", prof).output.split())
    assert ("; TP all-reduces over PCIe at 50% of the host link's 32 GB/s a direction (the GPU profile's fit on its "
            "TP > 1 runs; the default rule 35%, range 20%–65%)") in text
    won = _plan("--gpu-profile", prof, "--allreduce-link-share", "0.7")
    assert won["roofline"]["prefill"]["allreduce_s"] == pytest.approx(PREFILL_07_S, rel=1e-6)
    assert won["roofline"]["allreduce_link_share_source"] == "given by --allreduce-link-share"
    # a profile without a share: the rule's 0.35, as with none
    assert _plan("--gpu-profile", _profile(tmp_path, None))["roofline"]["prefill"]["allreduce_s"] == \
        pytest.approx(PREFILL_DEFAULT_S, rel=1e-6)


def test_at_tp1_there_is_no_all_reduce_to_name():
    res = run_cli("plan", MODEL, "--gpu", GPU, "--allreduce-link-share", "0.7", "--gpu-profile", "none", "--json")
    d = json.loads(res.output)
    assert d["roofline"]["prefill"].get("allreduce_s", 0.0) == 0.0
    assert "priced_by" not in d["roofline"] and "allreduce_link_share" not in d["roofline"]
    text = run_cli("plan", MODEL, "--gpu", GPU, "--allreduce-link-share", "0.7", "--gpu-profile", "none").output
    assert "note: --allreduce-link-share has nothing to price at TP 1 (no TP all-reduce)" in text
    # a model that does not fit has no roofline: nothing priced it (was: the link's line under "omitted")
    assert "priced by" not in run_cli("plan", "meta-llama/Llama-3.1-70B", "--gpu", "L4", "--tp", "2").output


def test_the_settings_carry_the_share_to_the_plans_step_cost_and_refuse_one_outside_0_1():
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.errors import InputError

    p = build_plan(load_model(MODEL), resolve_gpu(GPU), make_settings(tp=2, allreduce_link_share=0.7))
    # the step cost the plan's tier break-evens price recomputation with: 32 GB/s × 0.7; the settings are the one
    # place the share is read from (plan_pricing.plan_fractions decides it for simulate and the judgment commands)
    assert p.step_cost().link_bytes_per_s == pytest.approx(22.4e9)
    assert p.step_cost(host_step_s=1e-4).link_bytes_per_s == pytest.approx(22.4e9)  # a profile's host terms beside it
    assert build_plan(load_model(MODEL), resolve_gpu(GPU), make_settings(tp=2)).step_cost().link_bytes_per_s == \
        pytest.approx(11.2e9)
    with pytest.raises(InputError, match=r"^invalid setting: allreduce_link_share must be > 0, got 0\.0$"):
        make_settings(allreduce_link_share=0.0)
    with pytest.raises(InputError, match=r"^invalid setting: allreduce_link_share must be ≤ 1, got 1\.5$"):
        make_settings(allreduce_link_share=1.5)


@pytest.mark.parametrize("value", ["0", "1.5"])
def test_plan_refuses_a_share_outside_0_1_in_one_line(value):
    msg = refused("plan", MODEL, "--gpu", GPU, "--tp", "2", "--allreduce-link-share", value)
    assert msg == f"--allreduce-link-share {value} is out of range; allowed: (0, 1] (fraction)"


def test_plan_console_entry_exits_2():
    p = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "plan", MODEL, "--gpu", GPU, "--tp", "2",
                        "--allreduce-link-share", "0"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip() == \
        "error: --allreduce-link-share 0 is out of range; allowed: (0, 1] (fraction)", p.stderr
