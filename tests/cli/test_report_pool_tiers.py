"""``kvledger report`` takes ``--document-pool`` and the KV tier flags as ``simulate`` takes them: the plan section
sizes the tiers (``plan --kv-offloading-size``'s ``kv_tiers``), and a ``kv_tiers`` section runs the capacity's
requests with the tiers (``goodput --simulate`` with tier flags, the same run) beside the pool's Che, LRU-replay and
never-evicting shares; before, the report took neither."""

from __future__ import annotations

import shlex

import pytest
from cli_run import MODEL, cli_json, refused, run_cli

#: 100 requests, each prompt = one of 2 documents of 1,024 tokens (uniform) + a 16-token question, output 16 tokens
W = ["--gpu", "H100", "--prompt-lengths", "16", "--output-lengths", "16", "--num-requests", "100", "--slo", "ttft=2s",
     "--api", "OpenAI:gpt-4.1-mini", "--document-pool", "2:1024:uniform"]
HOST = ["--kv-offloading-size", "1"]


@pytest.fixture(scope="module")
def report() -> dict:
    return cli_json("report", MODEL, *W, *HOST)


def test_the_pool_shares_by_hand(report):
    sec = report["kv_tiers"]
    pool = sec["document_pool"]
    # seed 0 draws both documents among the 100 requests: 98 drew one seen before
    assert (pool["distinct_documents_drawn"], pool["requests_seen_before"]) == (2, 98)
    hbm, host = pool["expected"]
    # Llama-3.1-8B at TP 1: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 B = 131,072 B a token, 2 MiB a 16-token
    # block; 1 GiB of host offloading = 512 blocks = 8,192 tokens = 8 documents of 1,024
    assert (host["capacity_tokens"], host["capacity_documents"]) == (8192, 8.0)
    # HBM (hundreds of thousands of tokens) holds both documents (2,048 tokens): Che's h_i = 1 for each, so every
    # request hits its document, 1,024 of its 1,040 prompt tokens (½·1,024 + ½·1,024) = 0.984615
    assert hbm["che_hit_share"] == pytest.approx(1024 / 1040)
    # the replay counts the cold start: the 98 requests after each document's first hit 1,024 tokens,
    # 98 × 1,024 = 100,352 of 100 × 1,040 = 104,000 prompt tokens = 0.964923; a cache that never evicts, the same
    assert hbm["lru_replay_hit_share"] == pytest.approx(100_352 / 104_000) == pool["unbounded_hit_share"]
    # the host tier holds what HBM holds (write-through): it adds nothing, by either estimate
    assert (host["che_hit_share"], host["lru_replay_hit_share"]) == (0.0, 0.0)
    assert sec["kv_tiers"]["judgment"]["cause"] == "fits_in_hbm"
    # the concurrency the answer states is the pool's requests': 1,024 (document) + 16 (question) + 16 (output)
    assert report["inputs"]["workload_contexts"] == {"mean_tokens": 1056, "max_tokens": 1056}
    # the plan section sizes the same host tier, as plan --kv-offloading-size 1 does
    assert [t["capacity_tokens"] for t in report["plan"]["kv_tiers"]["tiers"]][1] == 8192


def test_the_section_is_goodput_simulates_run_with_the_tier(report):
    sec = report["kv_tiers"]
    cmd = report["commands"]["kv_tiers"].replace("RATE", repr(sec["rate_req_per_s"]))
    assert cmd.endswith("--rate 400.0 --kv-offloading-size 1 --json")
    g = cli_json(*shlex.split(cmd)[1:])
    assert g["simulation"]["workload"]["document_pool"] == sec["document_pool"]
    assert {k: v for k, v in g["kv_tiers"].items() if k != "occupancy_units"} == sec["kv_tiers"]
    assert sec["with_tier"]["attainment"] == g["attainment"]
    # the plan command of the report carries the tier flag, the simulator-only ones left out
    assert " --kv-offloading-size 1 " in report["commands"]["plan"]


def test_the_html_draws_the_tiers_figure(tmp_path):
    out = tmp_path / "r.html"
    res = run_cli("report", MODEL, *W, *HOST, "--out", str(out))
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert "id='kv-tiers'" in html and 'id="fig-kv_tier_hits"' in html
    # the host tier's row: 8,192 tokens, 8.0 documents, 0.0% simulated, by Che's formula and by the replay
    assert "<td class=\"t\">host_dram</td><td>8,192</td><td>8.0</td><td>0.0%</td><td>0.0%</td><td>0.0%</td>" in html
    assert "document pool (2 × 1,024 tokens, uniform): share of prompt tokens each KV tier serves" in html
    # the header names the pool as simulate's workload line does (98 of 100 requests drew a document seen before)
    assert ("Traffic: synthetic (prompt 16, output 16, arrival CV 1); document pool 2 documents × 1,024 tokens, "
            "uniform, one before each question (2 drawn; 98.0% of requests drew one seen before), 100 requests") in html


def test_a_pool_alone_gives_the_hbm_row():
    d = cli_json("report", MODEL, *W)
    (row,) = d["kv_tiers"]["document_pool"]["expected"]
    assert row["tier"] == "hbm" and row["lru_replay_hit_share"] == pytest.approx(100_352 / 104_000)
    assert "kv_tiers" not in d["kv_tiers"] and "kv_tiers" not in d["plan"]
    assert d["commands"]["kv_tiers"].startswith("kvledger simulate ")


def test_refused_before_any_simulation():
    on_trace = [a for a in W if a not in ("--prompt-lengths", "--output-lengths", "16")]
    assert refused("report", MODEL, *on_trace).startswith("--document-pool puts a drawn document before each "
                                                          "request's question")
    said = refused("report", MODEL, *W[:-1], "0:1024")
    assert said.startswith("--document-pool K 0 is out of range")
    said = refused("report", MODEL, *W, "--kv-offloading-size", "64", "--engine", "sglang")
    assert said.startswith("--kv-offloading-size is a vLLM flag; with --engine sglang")
    said = refused("report", MODEL, *W, "--nvme-read-bandwidth", "5")
    assert said.startswith("--nvme-read-bandwidth describes the disk tier, which exists only with --kv-tier-nvme")


def test_a_host_tier_that_holds_the_pool_hbm_does_not():
    # 40 documents of 1,024 tokens (40,960 tokens), drawn uniformly by 200 requests; --gpu-memory-utilization 0.24
    # leaves HBM 588 usable blocks × 16 = 9,408 tokens (9.19 documents), the host tier 8 GiB = 4,096 blocks of 2 MiB =
    # 65,536 tokens (64 documents): all 40 fit below HBM
    d = cli_json("report", MODEL, *W[:-1], "40:1024:uniform", "--num-requests", "200", "--gpu-memory-utilization",
                 "0.24", "--max-model-len", "4096", "--kv-offloading-size", "8")
    sec = d["kv_tiers"]
    pool = sec["document_pool"]
    hbm, host = pool["expected"]
    assert (hbm["capacity_tokens"], host["capacity_tokens"]) == (9408, 65536)
    # Che, uniform: every h_i = h, 40 × 1,024 × h = 9,408 → h = 0.229688; hit tokens a request 1,024 × h = 235.2 of
    # 1,040 = 0.226154. HBM + host hold all 40: 1,024 ÷ 1,040 = 0.984615, the host's share the difference, 0.758462
    assert hbm["che_hit_share"] == pytest.approx(9408 / 40960 * 1024 / 1040, rel=1e-6)
    assert host["che_hit_share"] == pytest.approx(1024 / 1040 - 9408 / 40960 * 1024 / 1040, rel=1e-6)
    # replay: HBM + host never evict here, so they serve what a cache that never evicts serves: the 160 requests whose
    # document was drawn before, 160 × 1,024 = 163,840 of 200 × 1,040 = 208,000 prompt tokens = 0.787692
    assert pool["requests_seen_before"] == 160
    assert hbm["lru_replay_hit_share"] + host["lru_replay_hit_share"] == pytest.approx(163_840 / 208_000)
    assert pool["unbounded_hit_share"] == pytest.approx(163_840 / 208_000)
    # the tier's effect at the capacity's rate: what HBM evicted is loaded back instead of recomputed
    t = sec["kv_tiers"]
    assert t["judgment"]["helps"] and host["simulated_hit_share"] > 0.5
    assert t["ttft_s_with_tier"]["p50"] < t["ttft_s_without_tier"]["p50"] / 10
    assert sec["with_tier"]["goodput_req_per_s"] > sec["without_tier"]["goodput_req_per_s"]
