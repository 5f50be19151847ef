"""``kvledger ui`` in a real browser: the server on a free loopback port, the page loaded, a field changed, and the
numbers and figures shown checked against ``plan --json`` for the same inputs."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()
CONTEXTS = "1K,2K,4K,8K,16K,32K,64K,128K"


@pytest.fixture(scope="module")
def server():
    import uvicorn

    from kvledger.report.webapp import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    for _ in range(200):
        if srv.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    th.join(timeout=10)


def _wait_version(browser, above: int, timeout_s: float = 60.0) -> str:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, timeout_s).until(
        lambda b: int(b.find_element("id", "status").get_attribute("data-version")) > above)
    return browser.find_element("id", "status").text


def _card(browser, key: str) -> float:
    return float(browser.find_element("id", key).get_attribute("data-value"))


def _plan_json(*extra: str) -> dict:
    res = runner.invoke(app, ["plan", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "nvidia_h100_sxm", "--context", CONTEXTS,
                              *extra, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _check_against(browser, plan: dict) -> None:
    conc = {r["context_tokens"]: r["max_concurrency"] for r in plan["concurrency"]}
    assert _card(browser, "kv-bytes-per-token") == plan["kv"]["bytes_per_token_per_gpu"]
    assert _card(browser, "num-gpu-blocks") == plan["memory"]["num_gpu_blocks"]
    assert _card(browser, "available-kv-gib") == pytest.approx(plan["memory"]["available_kv_bytes"] / 2**30, rel=1e-12)
    assert _card(browser, "max-concurrency-8k") == pytest.approx(conc[8192], rel=1e-12)
    assert _card(browser, "max-concurrency-128k") == pytest.approx(conc[131072], rel=1e-12)
    # each card shows the plan's range beside the point figure (the range's ends to the card's precision)
    a_lo, a_hi = plan["memory"]["ranges"]["available_kv_bytes"]
    b_lo, b_hi = plan["memory"]["ranges"]["num_gpu_blocks"]
    assert f"({a_lo / 2**30:,.2f}–{a_hi / 2**30:,.2f})" in browser.find_element("id", "available-kv-gib").text
    assert f"({b_lo:,}–{b_hi:,})" in browser.find_element("id", "num-gpu-blocks").text
    assert f"({b_lo / 512:,.2f}–{b_hi / 512:,.2f})" in browser.find_element("id", "max-concurrency-8k").text
    # the waterfall's table shows the same available KV memory, to the hundredth of a GiB
    table = browser.find_element("css selector", "#fig-memory_waterfall table").text
    assert f"{plan['memory']['available_kv_bytes'] / 2**30:,.2f}" in table
    for key in ("memory_waterfall", "concurrency_by_context", "decode_roofline"):
        assert browser.find_element("css selector", f"#fig-{key} svg").size["width"] > 200


def test_ui_numbers_follow_the_form_and_equal_plan_json(server, browser, tmp_path):
    from selenium.webdriver.support.ui import Select

    browser.get(server + "/")
    assert _wait_version(browser, 0) == "plan ready"
    _check_against(browser, _plan_json())
    # FP8 KV halves the bytes per token (1 B per element instead of 2): 65,536 B, and the blocks double
    Select(browser.find_element("id", "kv_cache_dtype")).select_by_value("fp8")
    assert _wait_version(browser, 1) == "plan ready"
    fp8 = _plan_json("--kv-cache-dtype", "fp8")
    assert fp8["kv"]["bytes_per_token_per_gpu"] == 65536
    _check_against(browser, fp8)
    assert browser.get_screenshot_as_png()[:4] == b"\x89PNG"


def test_ui_serving_panel_and_bad_input(server, browser):
    browser.get(server + "/")
    v = _wait_version(browser, 0) and int(browser.find_element("id", "status").get_attribute("data-version"))
    num = browser.find_element("id", "num_requests")
    num.clear()
    num.send_keys("60")
    browser.find_element("id", "run-serving").click()
    assert _wait_version(browser, v, 120) == "serving ready"
    for key in ("cost_by_utilization", "cost_by_volume", "latency_by_rate", "goodput_by_rate"):
        assert browser.find_element("css selector", f"#fig-{key} svg").size["width"] > 200
    from kvledger.report.webapp import serving_payload

    def direct(api: str | None) -> dict:
        return serving_payload("meta-llama/Meta-Llama-3.1-8B", "nvidia_h100_sxm", "ttft=200ms,tpot=50ms", api,
                               num_requests=60, monthly_tokens=3e8)["headline"]

    # the API field's default is the CLI's: the cheapest row serving the same model (its one note: the row serves FP8
    # weights, api_cost.quantized_row_note); the answer's break-even and what it rests on are drawn under it
    same = direct(None)
    assert _card(browser, "capacity") == same["sizing_req_per_s"]
    assert _card(browser, "api-output") == same["api_usd_per_mtok_output"]
    assert browser.find_element("id", "break-even").text == same["break_even"]
    assert browser.find_element("id", "rests-on").text == same["rests_on"] and same["rests_on"].startswith("Rests on: ")
    # and the one replica's missing spare (ledgers/spare_note.py), as cost prints it
    assert len(same["notes"]) == 2 and "serves an FP8-quantized variant" in same["notes"][0]
    assert same["notes"][1].startswith("not priced: a spare replica")
    assert browser.find_element("id", "answer-notes").text == "\n".join(same["notes"])
    # a row of another model: cost's note beside the answer
    from selenium.webdriver.support.ui import Select

    v = int(browser.find_element("id", "status").get_attribute("data-version"))
    Select(browser.find_element("id", "api")).select_by_value("OpenAI:gpt-4.1")
    assert _wait_version(browser, v, 120) == "serving ready"
    other = direct("OpenAI:gpt-4.1")
    assert _card(browser, "api-output") == 8.0  # gpt-4.1 list price, USD per 1M output tokens, no batch or cache share
    assert browser.find_element("id", "answer-notes").text == "\n".join(other["notes"])
    assert other["notes"][0].startswith("note: OpenAI:gpt-4.1 is not the same model")
    # a bad SLO answers with the CLI's one-paragraph message, shown on the page
    slo = browser.find_element("id", "slo")
    slo.clear()
    slo.send_keys("ttft=fast")
    v = int(browser.find_element("id", "status").get_attribute("data-version"))
    browser.find_element("id", "run-serving").click()
    assert _wait_version(browser, v) == "error"
    assert "ttft" in browser.find_element("id", "error").text


# five edits 40 ms apart (160 ms in all), each a real "change" event that sends a request: model, TP, max_model_len,
# KV dtype, TP again. Responses may arrive in any order; only the last request's answer may be painted.
EDITS = [("model", "meta-llama/Meta-Llama-3.1-70B"), ("tp", "2"), ("max_model_len", "32K"), ("kv_cache_dtype", "fp8"),
         ("tp", "4")]
EDIT_SCRIPT = """
const steps = arguments[0];
steps.forEach(([id, v], i) => setTimeout(() => { const e = document.getElementById(id); e.value = v;
  e.dispatchEvent(new Event("change")); }, i * 40));
"""


def _settled(browser, sent: int) -> bool:
    st = browser.find_element("id", "status")
    latest, painted = int(st.get_attribute("data-latest")), int(st.get_attribute("data-painted"))
    return latest >= sent and painted == latest and st.text == "plan ready"


def test_five_fast_edits_paint_only_the_final_plan(server, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server + "/")
    assert _wait_version(browser, 0) == "plan ready"
    first = int(browser.find_element("id", "status").get_attribute("data-latest"))
    browser.execute_script(EDIT_SCRIPT, [list(e) for e in EDITS])
    WebDriverWait(browser, 90).until(lambda b: _settled(b, first + len(EDITS)))
    time.sleep(1.0)  # any earlier answer still on its way must not be painted over the final one
    assert _settled(browser, first + len(EDITS))
    res = runner.invoke(app, ["plan", "meta-llama/Meta-Llama-3.1-70B", "--gpu", "nvidia_h100_sxm", "--tp", "4",
                              "--max-model-len", "32K", "--kv-cache-dtype", "fp8", "--context", CONTEXTS, "--json"])
    plan = json.loads(res.stdout)
    conc = {r["context_tokens"]: r["max_concurrency"] for r in plan["concurrency"]}
    # 70B at TP 4, fp8 KV: 80 layers × 2 KV heads per GPU × 128 × 2 (K and V) × 1 B = 40,960 B per token per GPU
    assert plan["kv"]["bytes_per_token_per_gpu"] == 40960
    assert _card(browser, "kv-bytes-per-token") == 40960
    assert _card(browser, "num-gpu-blocks") == plan["memory"]["num_gpu_blocks"]
    assert _card(browser, "available-kv-gib") == pytest.approx(plan["memory"]["available_kv_bytes"] / 2**30, rel=1e-12)
    assert _card(browser, "max-concurrency-8k") == pytest.approx(conc[8192], rel=1e-12)
    assert _card(browser, "max-model-len") == 32768
    # 128K is above max_model_len 32K: the card says so instead of a figure for requests the engine refuses
    card = browser.find_element("id", "max-concurrency-128k")
    assert card.get_attribute("data-value") == "" and "128K > max_model_len" in card.text
    req = json.loads(browser.find_element("id", "plan-request").get_attribute("data-request"))
    assert (req["model"], req["tp"], req["max_model_len"], req["kv_cache_dtype"]) == (
        "meta-llama/Meta-Llama-3.1-70B", 4, "32K", "fp8")


SET_FIELD = """const e = document.getElementById(arguments[0]); e.value = arguments[1];
e.dispatchEvent(new Event("change"));"""
# the page's next /api/serving answer held back until the test lets it through (window.__release), so the test decides
# when it arrives: after the field changed, before the new request goes out (600 ms later)
HOLD_NEXT_ANSWER = """const fetch0 = window.fetch; window.__release = null;
window.fetch = async (url, opts) => { const r = await fetch0(url, opts);
  if (url === "/api/serving" && !window.__held) {
    window.__held = true; await new Promise((go) => { window.__release = go; }); }
  return r; };"""
CLEAR_THEN_RELEASE = """const e = document.getElementById("client_latency"); e.value = "";
e.dispatchEvent(new Event("change")); window.__release();"""


def _serving_answer(browser) -> dict:
    return json.loads(browser.find_element("id", "serving-requests").get_attribute("data-request"))


def _version(browser) -> int:
    return int(browser.find_element("id", "status").get_attribute("data-version"))


def test_client_latency_field_reruns_and_never_paints_a_stale_answer(server, browser):
    from kvledger.report.webapp import serving_payload

    def direct(latency: str | None) -> float:
        return serving_payload("meta-llama/Meta-Llama-3.1-8B", "nvidia_h100_sxm", "ttft=200ms,tpot=50ms",
                               "OpenAI:gpt-4.1", num_requests=60, client_latency=latency)["headline"][
                                   "sizing_req_per_s"]

    browser.get(server + "/")
    _wait_version(browser, 0)
    browser.execute_script(SET_FIELD, "num_requests", "60")
    browser.execute_script(SET_FIELD, "client_latency", "30ms")
    v = _version(browser)
    browser.find_element("id", "run-serving").click()
    assert _wait_version(browser, v, 120) == "serving ready"
    assert browser.find_element("id", "client-latency-note").text.startswith(
        "client latency 30 ms added to every request's TTFT and E2E (not TPOT/ITL)")
    assert _serving_answer(browser)["client_latency"] == "30ms" and _card(browser, "capacity") == direct("30ms")
    # the field changed: the answer shown no longer answers the form, so it goes at once, and the panel asks again
    v = _version(browser)
    browser.execute_script(SET_FIELD, "client_latency", "")
    assert browser.find_elements("id", "serving-stale") and not browser.find_elements("id", "client-latency-note")
    assert _wait_version(browser, v, 120) == "serving ready"
    assert _serving_answer(browser).get("client_latency") is None and _card(browser, "capacity") == direct(None)
    assert not browser.find_elements("id", "client-latency-note")
    # pressed with 30 ms; its answer back but held; the field cleared, then the answer let through at once (before
    # the request for the cleared field goes out): the 30 ms answer is never painted, only the next one
    from selenium.webdriver.support.ui import WebDriverWait

    browser.execute_script(SET_FIELD, "client_latency", "30ms")
    browser.execute_script(HOLD_NEXT_ANSWER)
    v = _version(browser)
    browser.find_element("id", "run-serving").click()
    WebDriverWait(browser, 120).until(lambda b: b.execute_script("return window.__release !== null"))
    browser.execute_script(CLEAR_THEN_RELEASE)
    assert _wait_version(browser, v, 120) == "serving ready"
    time.sleep(1.0)  # nothing else may be painted after it
    assert _version(browser) == v + 1 and not browser.find_elements("id", "client-latency-note")
    assert _serving_answer(browser).get("client_latency") is None


def test_a_bad_client_latency_is_shown_as_the_fields_error(server, browser):
    browser.get(server + "/")
    _wait_version(browser, 0)
    browser.execute_script(SET_FIELD, "client_latency", "-5ms")
    v = _version(browser)
    browser.find_element("id", "run-serving").click()
    assert _wait_version(browser, v, 60) == "error"
    assert browser.find_element("id", "error").text.startswith(
        "invalid parameter: client_latency '-5ms' must be a finite, non-negative duration")


def test_a_refused_plan_clears_the_plan_shown(server, browser):
    browser.get(server + "/")
    assert _wait_version(browser, 0) == "plan ready"
    assert _card(browser, "kv-bytes-per-token") == 131072
    v = _version(browser)
    browser.execute_script(SET_FIELD, "tp", "3")  # 32 attention heads: TP 3 is refused
    assert _wait_version(browser, v) == "error"
    # the TP 1 plan's numbers and figures are gone; the panel says why, with the error
    assert not browser.find_elements("id", "kv-bytes-per-token")
    assert not browser.find_elements("id", "fig-memory_waterfall")
    failed = browser.find_element("id", "plan-failed").text
    assert failed.startswith("no plan for these inputs:") and "not divisible by 3" in failed
    v = _version(browser)
    browser.execute_script(SET_FIELD, "tp", "2")
    assert _wait_version(browser, v) == "plan ready" and _card(browser, "kv-bytes-per-token") == 65536
    assert not browser.find_elements("id", "plan-failed")


def test_the_serving_panel_follows_the_engine(server, browser):
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from kvledger.report.webapp import serving_payload

    def direct(engine: str) -> dict:
        return serving_payload("meta-llama/Meta-Llama-3.1-8B", "nvidia_h100_sxm", "ttft=200ms,tpot=50ms",
                               "OpenAI:gpt-4.1", num_requests=50, engine=engine)["headline"]

    browser.get(server + "/")
    _wait_version(browser, 0)
    browser.execute_script(SET_FIELD, "num_requests", "50")
    browser.execute_script(SET_FIELD, "monthly_tokens", "")
    browser.execute_script(SET_FIELD, "utilization", "0.5")
    v = _version(browser)
    browser.find_element("id", "run-serving").click()
    assert _wait_version(browser, v, 120) == "serving ready"
    vllm = direct("vllm")["sizing_req_per_s"]
    assert _serving_answer(browser)["engine"] == "vllm" and _card(browser, "capacity") == vllm
    # the utilization field's price, said beside the verdict (the verdict's own break-even is at the 80% ceiling)
    assert browser.find_element("id", "secondary").text.startswith(
        "secondary (not the verdict): at 50.0% utilization (given: the utilization field)")
    # the engine is one of the serving panel's fields: SGLang's answer replaces vLLM's
    Select(browser.find_element("id", "engine")).select_by_value("sglang")
    assert browser.find_elements("id", "serving-stale")
    WebDriverWait(browser, 120).until(lambda b: b.find_elements("id", "serving-requests")
                                      and _serving_answer(b)["engine"] == "sglang")
    sgl = direct("sglang")["sizing_req_per_s"]
    assert _card(browser, "capacity") == sgl != vllm
    # TensorRT-LLM: the simulator has no rules for it, so the panel says so and shows no numbers
    Select(browser.find_element("id", "engine")).select_by_value("trtllm")
    WebDriverWait(browser, 120).until(lambda b: b.find_elements("id", "serving-failed"))
    assert "engine 'trtllm'" in browser.find_element("id", "serving-failed").text
    assert not browser.find_elements("id", "capacity") and not browser.find_elements("id", "fig-latency_by_rate")


HOLD_NEXT_PLAN = HOLD_NEXT_ANSWER.replace('"/api/serving"', '"/api/plan"')


def test_the_plan_panel_marks_its_numbers_stale_and_never_paints_a_superseded_plan(server, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server + "/")
    assert _wait_version(browser, 0) == "plan ready"
    browser.execute_script(HOLD_NEXT_PLAN)
    browser.execute_script(SET_FIELD, "gpu", "amd_mi300x")
    # the H100's numbers go the moment the field changes: the panel says the plan is being computed again
    assert browser.find_element("id", "plan-stale").text == "inputs changed: computing the plan again"
    assert not browser.find_elements("id", "kv-bytes-per-token") and not browser.find_elements("id", "plan-request")
    assert not browser.find_elements("id", "fig-memory_waterfall")
    assert browser.find_element("id", "status").text == "computing plan"
    # the MI300X answer is back but held; the GPU changes again, then the held answer is let through: never painted
    WebDriverWait(browser, 60).until(lambda b: b.execute_script("return window.__release !== null"))
    v = _version(browser)
    browser.execute_script(SET_FIELD, "gpu", "nvidia_h200_sxm")
    browser.execute_script("window.__release();")
    assert _wait_version(browser, v) == "plan ready"
    time.sleep(1.0)  # nothing else may be painted after it
    assert _version(browser) == v + 1 and not browser.find_elements("id", "plan-stale")
    req = json.loads(browser.find_element("id", "plan-request").get_attribute("data-request"))
    assert req["gpu"] == "nvidia_h200_sxm" and "on nvidia_h200_sxm" in browser.find_element("id", "plan-request").text
    res = runner.invoke(app, ["plan", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "nvidia_h200_sxm", "--context",
                              CONTEXTS, "--json"])
    assert _card(browser, "num-gpu-blocks") == json.loads(res.stdout)["memory"]["num_gpu_blocks"]


def test_arxiv_and_the_data_folder_choices_reach_the_form(server, browser):
    from selenium.webdriver.support.ui import Select

    browser.get(server + "/")
    _wait_version(browser, 0)
    # arxiv has lengths but no arrival times: picking it fills the lengths fields with its trace forms (the API's and
    # report's --prompt-lengths trace:arxiv:prompt), picking a timed trace empties them again
    Select(browser.find_element("id", "trace")).select_by_value("arxiv")
    assert browser.find_element("id", "prompt_lengths").get_attribute("value") == "trace:arxiv:prompt"
    assert browser.find_element("id", "output_lengths").get_attribute("value") == "trace:arxiv:output"
    Select(browser.find_element("id", "trace")).select_by_value("azure-code")
    assert browser.find_element("id", "prompt_lengths").get_attribute("value") == ""
    kv = browser.execute_script(  # one call: an option read one by one can go stale while the list is refilled
        'return Array.from(document.getElementById("kv_cache_dtype").options).map(o => o.value);')
    assert "fp8_e4m3" in kv and "fp8_e5m2" in kv
    v = _version(browser)
    Select(browser.find_element("id", "quantization")).select_by_value("fp8")
    assert _wait_version(browser, v) == "plan ready"
    assert _card(browser, "num-gpu-blocks") == _plan_json("-q", "fp8")["memory"]["num_gpu_blocks"]
    assert ", -q fp8" in browser.find_element("id", "plan-request").text


def test_a_volume_typed_as_the_cli_takes_it_answers_for_that_volume(server, browser):
    # "1.5B" in the volume field (as `cost --monthly-tokens 1.5B`): 1.5 × 10⁹ tokens a month; it was refused ("must be
    # a number") though the field's neighbours and the CLI take it
    assert "for 1.5B tokens/month" in _serving_verdict(server, browser, "1.5B")


def _serving_verdict(server, browser, volume: str) -> str:
    """The verdict the web app gives for 60 requests at the monthly volume typed as ``volume``."""
    browser.get(server + "/")
    v = _wait_version(browser, 0) and int(browser.find_element("id", "status").get_attribute("data-version"))
    for key, value in (("num_requests", "60"), ("monthly_tokens", volume)):
        field = browser.find_element("id", key)
        field.clear()
        field.send_keys(value)
    browser.find_element("id", "run-serving").click()
    assert _wait_version(browser, v, 120) == "serving ready"
    return browser.find_element("id", "verdict").text


def test_a_volume_typed_per_day_answers_for_its_month(server, browser):
    # "100M/day" in the volume field (as `cost --monthly-tokens 100M/day`): 1e8 × (730 h ÷ 24 = 30.4167 days) =
    # 3.0417e9 tokens a month, the figure priced, with the conversion restated in the verdict
    verdict = _serving_verdict(server, browser, "100M/day")
    assert "for 3.04B tokens/month (" in verdict and "100M tokens/day × 30.42 days = 3.04B tokens/month)" in verdict


def test_the_kv_dtype_list_follows_the_engine_and_its_version(server, browser):
    # vLLM 0.33's CacheDType has bfloat16, not bf16; SGLang 0.5.23's choices have bf16 and bfloat16, 0.5.3's neither
    # (accounting.kv_dtype_choices): the list is refilled when the engine or the version changes, before the plan
    from selenium.webdriver.support.ui import Select, WebDriverWait

    def offered(b) -> list[str]:
        # read in one script call: the list is being refilled, and an option element read one by one can go stale
        return b.execute_script(
            'return Array.from(document.getElementById("kv_cache_dtype").options).map(o => o.value);')

    browser.get(server + "/")
    _wait_version(browser, 0)
    assert offered(browser) == ["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]
    Select(browser.find_element("id", "engine")).select_by_value("sglang")
    WebDriverWait(browser, 30).until(lambda b: "bf16" in offered(b))
    assert offered(browser) == ["auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"]
    Select(browser.find_element("id", "kv_cache_dtype")).select_by_value("bf16")
    version = browser.find_element("id", "engine_version")
    version.send_keys("0.5.3")
    browser.execute_script('document.getElementById("engine_version").dispatchEvent(new Event("change"));')
    WebDriverWait(browser, 30).until(lambda b: offered(b) == ["auto", "fp8_e4m3", "fp8_e5m2"])
    assert Select(browser.find_element("id", "kv_cache_dtype")).first_selected_option.get_attribute("value") == "auto"


def test_the_host_kv_tier_field_adds_its_card(server, browser):
    # 64 GiB of vLLM host offloading on Llama-3.1-8B at TP 1: 64 × 2^30 B ÷ 2,097,152 B a 16-token block = 32,768
    # blocks = 524,288 tokens, as plan --kv-offloading-size 64 sizes it
    browser.get(server + "/")
    v = _wait_version(browser, 0) and int(browser.find_element("id", "status").get_attribute("data-version"))
    assert not browser.find_elements("id", "host-kv-tier-tokens")
    browser.find_element("id", "kv_offloading_size").send_keys("64")
    browser.execute_script('document.getElementById("kv_offloading_size").dispatchEvent(new Event("change"));')
    assert _wait_version(browser, v) == "plan ready"
    tier = _plan_json("--kv-offloading-size", "64")["kv_tiers"]
    host = next(t for t in tier["tiers"] if t["name"] == "host_dram")
    assert _card(browser, "host-kv-tier-tokens") == host["capacity_tokens"] == 524_288
    assert "host KV tier 64 GiB" in browser.find_element("id", "plan-request").text


def _type(browser, field: str, value: str) -> None:
    box = browser.find_element("id", field)
    box.clear()
    box.send_keys(value)


def test_the_serving_panel_runs_the_host_tier_and_a_document_pool(server, browser):
    # 2 documents of 1,024 tokens before 16-token questions, 100 requests, a 1 GiB host tier (512 blocks of 2 MiB =
    # 8,192 tokens): both documents fit in HBM, which serves the 98 requests after each one's first, 98 × 1,024 =
    # 100,352 of 100 × 1,040 = 104,000 prompt tokens (96.5%); the host tier adds nothing (0.0%)
    browser.get(server + "/")
    v = _wait_version(browser, 0) and int(browser.find_element("id", "status").get_attribute("data-version"))
    for field, value in (("prompt_lengths", "16"), ("output_lengths", "16"), ("document_pool", "2:1024:uniform"),
                         ("kv_offloading_size", "1"), ("num_requests", "100"), ("slo", "ttft=2s")):
        _type(browser, field, value)
    browser.find_element("id", "run-serving").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 120).until(lambda b: b.find_elements("id", "kv-tier-shares"))
    assert browser.find_element("id", "kv-tier-shares").text == (
        "prompt tokens each KV tier served at the capacity: hbm 96.5%, host_dram 0.0% (the KV tiers figure below)")
    table = browser.find_element("css selector", "#fig-kv_tier_hits table").text
    assert "host_dram 8,192 8.0 0.0% 0.0% 0.0%" in table
    assert "document pool 2:1024:uniform" in browser.find_element("id", "serving-requests").text
    # a pool the parser cannot read: the CLI's message, the field named
    v = int(browser.find_element("id", "status").get_attribute("data-version"))
    _type(browser, "document_pool", "2:nope")
    browser.find_element("id", "run-serving").click()
    assert _wait_version(browser, v, 120) == "error"
    assert browser.find_element("id", "error").text.startswith(
        "the document pool field (document_pool) '2:nope': length distribution 'nope' not understood")
