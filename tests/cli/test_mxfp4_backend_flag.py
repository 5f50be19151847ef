"""``--mxfp4-backend``: the MXFP4 experts' backend a plan and a simulation assume (accounting/vllm_mxfp4_backend.py)."""

from __future__ import annotations

from cli_run import cli_json, refused

ARGS = ("plan", "openai/gpt-oss-120b", "--gpu", "h100-sxm", "--engine-version", "0.11.0", "--gpu-memory-utilization",
        "0.95", "--max-model-len", "16384")


def _weights(doc: dict) -> int:
    return next(d["bytes"] for d in doc["memory"]["deductions"] if d["name"] == "weights")


def test_plan_states_the_backend_and_the_flag_moves_the_weights():
    stock, given = cli_json(*ARGS), cli_json(*ARGS, "--mxfp4-backend", "triton")
    # stock 0.11.0 on Hopper: Marlin (no triton_kernels in the wheel); given triton: the Triton layout, without
    # Marlin's padding of the experts (5,504,827,392 B: tests/accounting/test_vllm_mxfp4_backend.py), up to the
    # allocator's 2 MiB rounding of the 72 fused expert tensors
    assert abs(_weights(stock) - _weights(given) - 5_504_827_392) <= 72 * 2 * 2**20
    notes = [n for n in stock["memory"]["notes"] if n.startswith("MXFP4 experts: marlin — vLLM 0.11.0 on sm90")]
    assert notes and "--mxfp4-backend triton where triton_kernels is installed" in notes[0]
    assert "MXFP4 experts: triton — triton as given (--mxfp4-backend)" in given["memory"]["notes"]


def test_unknown_backend_refused():
    assert "mxfp4_backend" in refused(*ARGS, "--mxfp4-backend", "cutlass").replace("-", "_")


def test_simulate_states_the_backend_and_takes_the_flag():
    sim = ("simulate", "openai/gpt-oss-20b", "--gpu", "h100-sxm", "--engine-version", "0.11.0", "--num-requests",
           "8", "--prompt-lengths", "fixed:256", "--output-lengths", "fixed:16", "--rate", "4")
    # the plan's line, as simulate passes the plan's notes on: Marlin on a stock 0.11.0, Triton as given
    assert any(n.startswith("MXFP4 experts: marlin — vLLM 0.11.0 on sm90") for n in cli_json(*sim)["notes"])
    given = cli_json(*sim, "--mxfp4-backend", "triton")["notes"]
    assert "MXFP4 experts: triton — triton as given (--mxfp4-backend)" in given
