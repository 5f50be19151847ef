"""SGLang's ``server_info`` (the server's record that ``bench_serving`` writes beside each run) is read once, the
same way for a line with per-request arrays and for an aggregate-only one: the version, the GPUs it states and its
KV pool.

The fixture is synthetic (tests/fixtures/sglang_synthetic/README.md): server_info version 0.5.6, TP 2 (dp 1, pp 1),
max_total_num_tokens 1,011,010."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.run_record import recorded_settings
from kvledger.calibration.targets import load_targets
from kvledger.calibration.validate import validate_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sglang_synthetic" / "llama8b_tp2_rates.jsonl"
ARGS = SimRequestArgs(model=None, gpu="H100", tp=None)
_ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "errors")


def _lines(**server) -> list[dict]:
    lines = [json.loads(x) for x in FIXTURE.read_text().splitlines()]
    return [{**x, "server_info": {**x["server_info"], **server}} for x in lines]


def _write(path: Path, lines: list[dict]) -> str:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def _aggregate(tmp_path: Path, **server) -> str:
    return _write(tmp_path / "agg.jsonl", [{k: v for k, v in x.items() if k not in _ARRAYS}
                                           for x in _lines(**server)])


def test_an_aggregate_lines_server_version_is_read_as_a_per_request_lines(tmp_path):
    # line 3 at 8 req/s without its arrays: its stage keeps server_info.version 0.5.6, so the replay plans with
    # SGLang 0.5.6's rules, not the newest release's (the user's "0.5.23 rules" on the aggregate path)
    t = next(t for t in load_targets(_aggregate(tmp_path)) if t.order == 2)
    rec = recorded_settings(t.run.measured.metadata.extra)
    assert (rec.engine_version, rec.flags["tp"], rec.flags["policy"]) == ("0.5.6", 2, "sglang")
    one = validate_file(str(tmp_path / "agg.jsonl"), ARGS, run=2)
    assert one.rate == 8.0
    assert any("engine_version 0.5.6" in n for n in one.notes)
    assert any("SGLang 0.5.6 rules" in n for n in one.notes) and not any("0.5.23 rules" in n for n in one.notes)


def test_the_gpus_a_server_ran_on_are_read_off_its_server_info(tmp_path):
    from kvledger.evidence import read_runs

    # tp_size 2 × dp_size 1 × pp_size 1 = 2 GPUs, and where that was read
    md = read_runs(FIXTURE)[0].metadata
    assert md.num_gpus == 2
    assert md.extra["num_gpus_source"] == f"{FIXTURE} line 1: server_info: tp_size 2 × dp_size 1 × pp_size 1"
    # two data-parallel engines of TP 2: 2 × 2 = 4; with DP attention the DP ranks share the TP group: 2 × 1 = 2
    dp = _write(tmp_path / "dp.jsonl", _lines(dp_size=2))
    assert read_runs(dp)[0].metadata.num_gpus == 4
    att = _write(tmp_path / "att.jsonl", _lines(dp_size=2, enable_dp_attention=True))
    assert read_runs(att)[0].metadata.num_gpus == 2


def test_cost_prices_the_gpus_server_info_states_and_says_so():
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    res = CliRunner().invoke(app, ["cost", str(FIXTURE), "--slo", "ttft=200ms,tpot=50ms", "--gpu", "H100",
                                   "--gpu-provider", "Nebius", "--monthly-tokens", "3e9", "--json"])
    assert res.exit_code == 0, res.output  # no --num-gpus needed
    d = json.loads(res.stdout)
    assert d["inputs"]["num_gpus"] == 2
    said = d["notes"][0]
    assert said.startswith("priced run: ") and said.endswith(
        f"2 GPUs a replica (from {FIXTURE} line 3: server_info: tp_size 2 × dp_size 1 × pp_size 1)")


def _replayed(path: str):
    from kvledger.calibration.api import engine_for

    t = next(t for t in load_targets(path) if t.order == 0)
    return engine_for(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", tp=None), t.run)


def test_the_servers_kv_pool_is_the_replays_and_said_to_match_or_differ(tmp_path):
    # the fixture's pool is what SGLang 0.5.6's plan gives Llama-3.1-8B at TP 2 on an H100 at mem_fraction_static
    # 0.88: 1,011,010 token slots (61.71 GiB ÷ 65,536 B a token: 32 layers × 8 KV heads ÷ 2 ranks × 128 × 2 (K, V)
    # × 2 B); no "recorded, not modelled" warning, a note that they match; the engine gets 1,011,010 + the padded page
    s = _replayed(str(FIXTURE))
    assert s.plan.memory.usable_blocks == 1_011_010 and s.config.num_gpu_blocks == 1_011_011
    assert not any("max-total-tokens" in n for n in s.notes)
    pool = next(n for n in s.notes if n.startswith("KV pool: "))
    assert "the pool the server recorded (server_info max_total_num_tokens 1,011,010) matches it" in pool
    # a server that sized 1,000,000: replayed with its own pool, the plan's 1,011,010 named (+1.1% against it)
    s = _replayed(_write(tmp_path / "pool.jsonl", _lines(max_total_num_tokens=1_000_000)))
    assert s.plan.memory.usable_blocks == 1_000_000 and s.config.num_gpu_blocks == 1_000_001
    pool = next(n for n in s.notes if n.startswith("KV pool: "))
    assert pool.startswith("KV pool: 1,000,000 token slots in 1,000,000 pages of 1 token: the pool the server "
                           "recorded (server_info max_total_num_tokens 1,000,000), replayed as it, not the 1,011,010 "
                           "SGLang's memory plan gives (+1.1% against the recorded)")
