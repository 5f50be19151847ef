"""``kvledger.simulate`` takes ``kvledger simulate``'s session loop (``workload``, ``sessions``, ``session_rate``) and
its host KV tier flags (``kv_offloading_size`` and the rest), and its result carries their reports as typed records:
``.sessions`` (``SessionReport``, the JSON's ``workload.sessions``) and ``.kv_tiers`` (``SimTierReport``, the JSON's
``kv_tiers``). Before, neither group was a parameter: no API result had a place for their reports."""

from __future__ import annotations

import json
import re

import pytest
from api_cli_json import cli_json, plain
from typer.testing import CliRunner

import kvledger
from kvledger import InputError
from kvledger.cli.main import app

L8 = "meta-llama/Llama-3.1-8B"


_cli, _plain = cli_json, plain


def test_a_session_run_carries_the_sessions_drawn_as_the_command_prints_them():
    s = kvledger.simulate(L8, "H100", workload="chat", sessions=8, session_rate=1.0, max_model_len="32K")
    cli = _cli("simulate", L8, "--gpu", "H100", "--workload", "chat", "--sessions", "8", "--session-rate", "1",
               "--max-model-len", "32K")
    assert _plain(s.to_dict()) == cli and s.kv_tiers is None
    assert _plain(s.sessions.to_dict()) == cli["workload"]["sessions"]
    r = s.sessions
    # the chat preset (dynamics.workload.sessions.CHAT): ~4 turns, 30 s think time, 512-token system prompt; every
    # one of the 8 sessions fits the 32K cap (32 × 1,024 = 32,768 tokens, from --max-model-len), so 8 are drawn
    assert (r.kind, r.num_sessions, r.session_rate_per_s, r.segment_tokens) == ("chat", 8, 1.0, 64)
    assert (r.shape.mean_turns, r.shape.think_mean_s, r.shape.system_tokens) == (4.0, 30.0, 512)
    # where the cap came from, named as the call takes it (the command's JSON says --max-model-len)
    assert r.context_cap_tokens == 32_768 and r.context_cap_source == "max_model_len"
    assert kvledger.simulate(L8, "H100", num_requests=5).sessions is None


def _trace(tmp_path) -> str:
    """Three requests of 1,040 prompt tokens (two 512-token prefix segments + 16 tokens of their own) and 4 output
    tokens, 1 s apart: A = segments [1, 2], B = [3, 4], C = [1, 2] again."""
    path = tmp_path / "abc.jsonl"
    path.write_text("".join(json.dumps({"arrival_s": t, "num_prompt_tokens": 1040, "num_output_tokens": 4,
                                        "prefix_segments": seg}) + "\n" for t, seg in ((0, [1, 2]), (1, [3, 4]),
                                                                                        (2, [1, 2]))))
    return str(path)


def test_a_host_tier_run_carries_the_tier_report_with_hand_worked_hits_and_bytes(tmp_path):
    trace = _trace(tmp_path)
    t = kvledger.simulate(L8, "H100", trace=trace, num_gpu_blocks_override=67, max_model_len=1056,
                          kv_offloading_size=1)
    cli = _cli("simulate", L8, "--gpu", "H100", "--trace", trace, "--num-gpu-blocks-override", "67",
               "--max-model-len", "1056", "--kv-offloading-size", "1")
    assert _plain(t.to_dict()) == cli and t.sessions is None
    assert _plain(t.kv_tiers.to_dict()) == cli["kv_tiers"]
    k = t.kv_tiers
    hbm, host = k.tier("hbm"), k.tier("host_dram")
    # Llama-3.1-8B: 32 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 B = 131,072 B a token, 2 MiB a 16-token block;
    # 1 GiB of host memory holds 2^30 // 2^21 = 512 blocks (vLLM 0.33.0 CPUOffloadingSpec).
    assert (k.host_tier.capacity_units, k.host_tier.bytes_per_token, k.host_tier.unit_tokens) == (512, 131_072, 16)
    # HBM: 67 blocks, 66 usable (vLLM's null block). Each request holds 1,040 + 3 fed-back output tokens = 66 blocks,
    # the whole pool, so B takes every block A freed: A's 65 cached prompt blocks are gone from HBM when C arrives,
    # and C hits nothing in HBM (with the tier or without it).
    assert (hbm.hit_tokens, k.hbm_hit_rate_without_tier) == (0, 0.0)
    # The host stored every full block as it was computed (write-through): A's 65 and B's 65 (1,040 / 16) before C's
    # admission (peak 130 of 512, none evicted); C's prefix [1, 2] is A's first 1,024 tokens = 64 blocks, loaded from
    # the host before C is scheduled: 1,024 × 131,072 B = 134,217,728 B (128 MiB) over the host link's 51.2 GB/s
    # (H100 SXM 128 GB/s both ways ÷ 2 × 0.8) = 2.62144 ms. C's own 65th block is new: 131 blocks stored in all.
    assert (host.hit_tokens, host.loaded_tokens, host.loaded_bytes) == (1024, 1024, 134_217_728)
    assert host.load_s == pytest.approx(134_217_728 / 51.2e9, rel=1e-12)
    assert (host.peak_units, host.stored_units, host.evicted_units) == (130, 131, 0)
    assert host.hit_rate == pytest.approx(1024 / (3 * 1040))  # of 3,120 prompt tokens
    assert k.prompt_tokens == 3120 and k.ttft_s_with_tier.count == k.ttft_s_without_tier.count == 3
    assert kvledger.simulate(L8, "H100", num_requests=5).kv_tiers is None


def _in_python_terms(message: str) -> str:
    return "kvledger.simulate: " + re.sub(r"--([a-z][a-z0-9-]*)", lambda m: m.group(1).replace("-", "_"), message)


@pytest.mark.parametrize(("kwargs", "flags"), [
    ({"sessions": 3}, ["--sessions", "3"]),
    ({"workload": "chats"}, ["--workload", "chats"]),
    ({"workload": "chat", "rate": 3.0}, ["--workload", "chat", "--rate", "3"]),
    ({"sessions": 0, "workload": "chat"}, ["--sessions", "0", "--workload", "chat"]),
    ({"kv_offloading_size": "lots"}, ["--kv-offloading-size", "lots"]),
    ({"kv_offloading_size": 64, "kv_offloading_backend": "foo"}, ["--kv-offloading-size", "64",
                                                                  "--kv-offloading-backend", "foo"]),
    ({"network_bandwidth": 10.0}, ["--network-bandwidth", "10"]),
    ({"store_threshold": 2}, ["--store-threshold", "2"]),
    ({"policy": "sglang", "hicache_ratio": 0.0}, ["--policy", "sglang", "--hicache-ratio", "0"]),
    ({"enable_hierarchical_cache": True}, ["--enable-hierarchical-cache"]),
])
def test_bad_session_and_tier_arguments_are_the_command_s_errors_in_parameter_names(kwargs, flags):
    res = CliRunner().invoke(app, ["simulate", L8, "--gpu", "H100", "--num-requests", "5", *flags])
    assert isinstance(res.exception, InputError), res.output
    with pytest.raises(InputError) as err:
        kvledger.simulate(L8, "H100", num_requests=5, **kwargs)
    assert str(err.value) == _in_python_terms(str(res.exception))


def test_goodput_with_a_host_tier_is_the_command_s_run_and_carries_the_same_tier_report(tmp_path):
    trace = _trace(tmp_path)
    kw = dict(trace=trace, num_gpu_blocks_override=67, max_model_len=1056, kv_offloading_size=1)
    g = kvledger.goodput(L8, "H100", slo="ttft=1s", cache=False, **kw)
    cli = _cli("goodput", "--simulate", L8, "--gpu", "H100", "--slo", "ttft=1s", "--trace", trace,
               "--num-gpu-blocks-override", "67", "--max-model-len", "1056", "--kv-offloading-size", "1")
    assert _plain(g.to_dict()) == cli and _plain(g.kv_tiers.to_dict()) == cli["kv_tiers"]
    # the run simulate runs: the worked case above, C's 1,024 prompt tokens loaded from the host
    assert g.kv_tiers.to_dict() == kvledger.simulate(L8, "H100", **kw).kv_tiers.to_dict()
    assert g.kv_tiers.tier("host_dram").hit_tokens == 1024
    assert kvledger.goodput(L8, "H100", slo="ttft=1s", num_requests=5, cache=False).kv_tiers is None
    # a target with the tier searches the request rate with it (tests/cli/test_goodput_tier_target.py), not another axis
    with pytest.raises(InputError, match=r"^kvledger\.goodput: target with KV tier flags searches the request rate "
                                         r".*drop axis, or the tier flags"):
        kvledger.goodput(L8, "H100", slo="ttft=1s", target=0.9, axis="concurrency", cache=False, **kw)
