"""``kvledger report``: the HTML holds every figure with its table, its numbers equal the --json of the commands it
summarises, PNGs, refusals, and a headless-Chromium render."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.report.html_report import SECTIONS
from kvledger.report.jsonout import strict_json

runner = CliRunner()
BENCH = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf" / "stage_1_lifecycle_metrics.json"
FIGURES = [k for _, _, keys in SECTIONS for k in keys]
# a small workload keeps the test fast: 150 requests per simulation (docs/reference.md's command uses 2,000)
ARGS = ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--slo", "ttft=200ms,tpot=50ms",
        "--api", "OpenAI:gpt-4.1", "--num-requests", "150", "--engineer-months-per-month", "0.1",
            "--engineer-usd-per-month", "20000",
        "--cache-hit-rate", "0.5", "--monthly-tokens", "3e8"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    res = runner.invoke(app, ["report", *ARGS, "--out", str(d / "r.html"), "--png", str(d / "png"),
                              "--bench", str(BENCH), "--json"])
    assert res.exit_code == 0, res.output
    return d, json.loads(res.stdout)


def _norm(x):
    return json.loads(strict_json(x))


def _cli_json(cmd: str) -> dict:
    argv = shlex.split(cmd)
    assert argv[0] == "kvledger"
    res = runner.invoke(app, argv[1:])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1]) if argv[1] == "goodput" else json.loads(res.stdout)


def test_report_numbers_equal_plan_and_cost_json(built):
    _, data = built
    assert data["plan"] == _norm(_cli_json(data["commands"]["plan"]))
    assert data["cost"] == _norm(_cli_json(data["commands"]["cost"]))
    # hand check of the plan behind the figures: 2 (K,V) × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B per token, and
    # an
    # 8K request needs 8,192 / 16 = 512 blocks, so the concurrency at 8K is num_gpu_blocks / 512
    conc = {r["context_tokens"]: r for r in data["plan"]["concurrency"]}
    assert data["plan"]["kv"]["bytes_per_token_per_gpu"] == 131072
    assert conc[8192]["blocks_per_request"] == 512
    assert conc[8192]["max_concurrency"] == pytest.approx(data["plan"]["memory"]["num_gpu_blocks"] / 512)


def test_report_capacity_and_sweep_equal_goodput_and_simulate_json(built):
    _, data = built
    cs = data["cost"]["simulation"]["capacity_search"]
    g = _cli_json(data["commands"]["capacity"])
    assert g["boundary"]["boundary_value"] == cs["slo_capacity_req_per_s"]
    assert _norm(g["probes"]) == cs["probes"]
    point = data["rate_sweep"][0]  # 0.25 × the capacity
    sim = _cli_json(data["commands"]["sweep_point"].replace("RATE", repr(point["rate_req_per_s"])))
    assert _norm(sim["summary"]) == point["summary"]
    static = _cli_json(
        data["commands"]["engine_savings"]
        .replace("RATE", repr(cs["slo_capacity_req_per_s"]))
        .replace("static|contiguous", "static")
    )
    assert _norm(static["summary"]) == data["engine_savings"]["static"]["summary"]
    # each ratio is the continuous engine's figure over its named baseline
    r = data["engine_savings"]["ratios"][0]
    assert r["baseline"].startswith("static batching")
    engine_tok_s = data["engine_savings"]["engine"]["summary"]["throughput_output_tok_per_s"]
    assert r["throughput_ratio"] == pytest.approx(engine_tok_s / static["summary"]["throughput_output_tok_per_s"])


def test_measured_points_equal_goodput_json(built):
    # inference-perf stage 1 (Llama-3-8B on one H100 at 37.97 req/s offered): the point drawn is what `goodput FILE
    # --json` says
    _, data = built
    (m,) = data["measured"]
    res = runner.invoke(app, ["goodput", str(BENCH), "--slo", "ttft=200ms,tpot=50ms", "--json"])
    g = json.loads(res.stdout)
    assert (m["rate_req_per_s"], m["attainment"], m["goodput_req_per_s"]) == (37.97, g["attainment"],
                                                                              g["goodput_req_per_s"])
    assert m["estimate"] is True  # the file holds percentiles only: a bounded estimate, flagged
    # the latency point is the file's own p90 TTFT (inference-perf successes.latency.time_to_first_token, 37.5 ms)
    assert m["ttft_s"]["p90"] == pytest.approx(0.03753255426418036)


def test_measured_tpot_is_the_derived_one_with_goodputs_note(built):
    # the stage file's own time_per_output_token (p50 4.09 ms) is below the 4.79 ms an H100 needs to read the weights
    # once (ledgers/tpot_derived.py): the row gives none, and the bounds on the derived (E2E − TTFT)/(output − 1)
    # percentiles instead, from the same shared function goodput's load check reads, with goodput's note
    from kvledger.evidence import read_runs
    from kvledger.ledgers.tpot_derived import derived_tpot_note, derived_tpot_percentile, tpot_derivation

    d, data = built
    (m,) = data["measured"]
    (agg,) = read_runs(str(BENCH))
    how = tpot_derivation(agg)
    assert m["tpot_s"] is None
    for q in (50, 90, 99):
        assert m["tpot_derived_s"][f"p{q}"] == pytest.approx(list(derived_tpot_percentile(agg, how, q, 2278)))
    # hand bracket from the file (s): output fixed at 64 tokens (config.yaml, ignore_eos), so every request's derived
    # TPOT lies in [(E2E min − TTFT max)/63, (E2E max − TTFT min)/63] = [(0.49196 − 0.07009)/63, (0.64183 − 0.02135)/63]
    # = [6.70, 9.85] ms; each percentile's bounds lie inside it, and far above the file's own 4.09 ms
    for lo, hi in m["tpot_derived_s"].values():
        assert 6.696e-3 <= lo <= hi <= 9.849e-3
    g = json.loads(runner.invoke(app, ["goodput", str(BENCH), "--slo", "ttft=200ms,tpot=50ms", "--json"]).stdout)
    assert m["notes"] == [derived_tpot_note(agg, how)]
    assert any(m["notes"][0] in n for n in g["notes"])  # goodput's reason for the TPOT SLO carries the same note
    assert "derived mean 8.46 ms" in m["notes"][0]  # (E2E mean 564.3 − TTFT mean 31.3 ms)/63 = 8.46 ms
    import html

    assert html.escape(m["notes"][0], quote=True) in (d / "r.html").read_text()


def test_report_break_even_lines_meet_where_the_ledger_says(built):
    _, data = built
    cu = data["curves"]["utilization"]
    u_star = data["cost"]["break_even_utilization"]["utilization"]
    assert cu["break_even_utilization"] == u_star
    # self-hosted USD per request = fixed ÷ (requests at full load × u): at u* it equals the API's price per request
    p = cu["points"][0]
    at_star = p["self_host_usd_per_1k_requests"] * p["utilization"] / u_star
    assert at_star == pytest.approx(p["api_usd_per_1k_requests"], rel=1e-9)
    cv = data["curves"]["volume"]
    assert cv["break_even_requests_per_month"] == data["cost"]["break_even_volume"]["requests_per_month"]


def test_report_html_is_one_self_contained_file_with_every_figure(built):
    d, data = built
    html = (d / "r.html").read_text(encoding="utf-8")
    for key in FIGURES:
        m = re.search(rf'<section class="fig" id="fig-{key}".*?</section>', html, re.S)
        assert m, key
        assert "<svg" in m.group(0) and "<table>" in m.group(0) and "Sources:" in m.group(0)
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert not re.search(r'(src|href)\s*=\s*["\']?https?:', html) and "url(http" not in html and "@import" not in html
    # the answer paragraph quotes the cost JSON's capacity
    assert f"{data['cost']['simulation']['capacity_search']['slo_capacity_req_per_s']:g} req/s" in html
    # no document outside the package is cited
    assert "engines.md" not in html and "seed-claims" not in html


def test_report_writes_pngs(built):
    d, _ = built
    for key in FIGURES:
        assert (d / "png" / f"{key}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_refuses_to_overwrite(built):
    d, _ = built
    res = runner.invoke(app, ["report", *ARGS, "--out", str(d / "r.html")])
    assert res.exit_code != 0 and "refusing to overwrite" in str(res.exception)


def test_html_is_a_function_of_the_json(built):
    # the HTML drawn again from the printed --json is byte-identical to the file written: no hidden inputs, no clock
    from kvledger.analyses.serving.report_data import ReportData
    from kvledger.report.html_report import render_html, report_figures

    d, printed = built
    data = ReportData.from_dict(printed)  # the views take the record; rebuilt from its JSON, it holds every input
    assert data.to_dict() == printed
    figures = report_figures(data)
    assert render_html(data, figures) == (d / "r.html").read_text(encoding="utf-8")
    # units on every axis: each axis has a label (with its unit) or is categorical (named bars); twins share the x label
    def words(ticks):
        return [t.get_text() for t in ticks if t.get_text() and t.get_text()[0].isalpha()]

    for f in figures:
        for ax in f.fig.axes:
            assert ax.get_ylabel() or words(ax.get_yticklabels()), (f.key, "y")
            twin = any(other is not ax and other.bbox.bounds == ax.bbox.bounds for other in f.fig.axes)
            assert ax.get_xlabel() or twin or words(ax.get_xticklabels()), (f.key, "x")
        assert f.rows and all(len(r) == len(f.headers) for r in f.rows) and f.sources, f.key


def test_headless_chromium_renders_every_figure(built, browser):
    d, _ = built
    browser.get((d / "r.html").as_uri())
    for key in FIGURES:
        el = browser.find_element("css selector", f"#fig-{key} svg")
        size = el.size
        assert size["width"] > 200 and size["height"] > 100, (key, size)
    assert browser.get_screenshot_as_png()[:4] == b"\x89PNG"


def test_report_with_a_volume_leads_with_the_bills_against_the_same_model():
    # issue 21: no --api, a volume: the answer box opens with both monthly bills; the API rows serve Llama-3.1-8B
    from kvledger.analyses.serving.decision_data import ReportRequest, build_report_data
    from kvledger.report.html_report import _answer

    req = ReportRequest(model="meta-llama/Llama-3.1-8B", gpu="H100", slo="ttft=500ms,tpot=50ms", num_requests=150,
                        monthly_tokens=3e8, with_sweep=False, with_engine_savings=False)
    data = build_report_data(req)
    assert data.rate_sweep is None and "rate_sweep" not in data.to_dict()  # not run: the key is left out
    dec = data.cost["decision"]
    assert dec is not None and all(a["same_model"] for a in dec["api_options"]) and len(dec["api_options"]) == 4
    # the cheapest same-model row is DeepInfra's ($0.02 in / $0.03 out per 1M, low confidence), so the verdict says so
    assert dec["api"].startswith("DeepInfra:") and any("low confidence" in r for r in dec["rests_on"])
    first = re.search(r'<div class="answer" id="answer"><p>([^<]*)</p>', _answer(data)).group(1)
    assert first.startswith("answer: the API — $")
    assert "/month on the API vs $" in first and "/month self-hosted" in first


def test_report_prints_the_plan_ranges_beside_the_point_figures(built):
    d, data = built
    m = data["plan"]["memory"]
    a_lo, a_hi = m["ranges"]["available_kv_bytes"]
    b_lo, b_hi = m["ranges"]["num_gpu_blocks"]
    assert b_lo < m["num_gpu_blocks"] < b_hi  # the vLLM plan's fitted terms give a range
    html = (d / "r.html").read_text()
    gib = f"{m['available_kv_bytes'] / 2**30:,.2f} ({a_lo / 2**30:,.2f}–{a_hi / 2**30:,.2f})"
    assert gib in html  # the waterfall's last row and the answer both carry it
    assert f"{m['num_gpu_blocks']:,} ({b_lo:,}–{b_hi:,})" in html
    # an 8K request holds 8,192 / 16 = 512 blocks: the concurrency range is the block range ÷ 512 at each end
    c8 = next(r for r in data["plan"]["concurrency"] if r["context_tokens"] == 8192)
    assert c8["max_concurrency_range"] == pytest.approx([b_lo / 512, b_hi / 512])
    assert f"{c8['max_concurrency']:,.2f} ({b_lo / 512:,.2f}–{b_hi / 512:,.2f})" in html


def test_report_html_carries_the_capacity_band_and_the_not_steady_warning(built):
    # 150 requests per probe: the probe at the capacity ends with its queue still growing (queue_growth), so the
    # answer warns; the capacity's band is in the answer, the latency table (load as a share of the band) and the
    # probe table's caption, and the probe rates print as goodput prints them (:g)
    d, data = built
    cs = data["cost"]["simulation"]["capacity_search"]
    html = " ".join((d / "r.html").read_text().split())
    band = f"(80% band {cs['error_band']['low']:.4g}–{cs['error_band']['high']:.4g} req/s, uncalibrated roofline)"
    assert f"{cs['slo_capacity_req_per_s']:g} req/s{band}" in html.replace(" (80% band", "(80% band")
    assert cs["not_steady"] is not None and "Warning: the probe at the capacity" in html
    assert "load, % of capacity (80% band)" in html and "Shaded: the capacity&#x27;s 80% band" in html
    for p in cs["probes"]:
        assert f"<td>{p['value']:g}</td>" in html


def test_report_html_drawn_beside_a_forked_worker_is_byte_identical(built):
    # issue 25: the worker of `kvledger report` (two of the seven runs after the capacity search, every figure) gives
    # the same bytes as one process: the file `built` wrote (its figures drawn here) equals data + figures from a
    # worker, and the data built with a worker equals the serial data (a fork, so about 1 s)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from kvledger.analyses.serving.decision_data import ReportRequest, build_report_data
    from kvledger.analyses.serving.report_data import ReportData
    from kvledger.report.html_store import report_html

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform: the report runs in one process")
    d, data = built
    req = ReportRequest(model="meta-llama/Llama-3.1-8B", gpu="H100", slo="ttft=200ms,tpot=50ms", num_requests=150,
                        with_sweep=True, with_engine_savings=True)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        assert report_html(ReportData.from_dict(data), pool) == (d / "r.html").read_text(encoding="utf-8")
        assert strict_json(build_report_data(req, pool=pool).to_dict()) == strict_json(build_report_data(req).to_dict())


def test_log_axis_tick_labels_are_plain_text():
    # matplotlib labels log ticks with mathtext ($\mathdefault{10^{3}}$), whose parser took about a quarter of the
    # report's drawing time; the same glyphs as plain text: 10³, 2×10⁻¹, −2⁸; anything else is left alone
    from kvledger.report.figure import new_axes, plain_power, svg_of

    assert plain_power(r"$\mathdefault{10^{3}}$") == "10³"
    assert plain_power(r"$\mathdefault{2\times10^{-1}}$") == "2×10⁻¹"
    assert plain_power(r"$\mathdefault{-2^{8}}$") == "−2⁸"
    assert plain_power(r"$\mathdefault{0}$") == "0"
    assert plain_power(r"$\mathdefault{10^{2.50}}$") == r"$\mathdefault{10^{2.50}}$"
    assert plain_power("batch 4") == "batch 4"
    fig, ax = new_axes()
    ax.plot([1, 1000], [1, 2])
    ax.set_xscale("log")  # decades 10⁰ … 10³ labelled
    svg = svg_of(fig)
    assert all(f"10{e}" in svg for e in "⁰¹²³") and "mathdefault" not in svg
