"""The single page of ``kvledger ui``: a form, the headline numbers and the figures, updated from the JSON endpoints (inline CSS and script, nothing fetched from elsewhere)."""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kvledger</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#222}
header{background:#24292f;color:#fff;padding:.6em 1.2em}header h1{font-size:1.2em;margin:0}
main{display:grid;grid-template-columns:290px 1fr;gap:1.2em;padding:1em 1.2em}
form label{display:block;font-size:.8em;margin:.5em 0 .1em;color:#444}form select,form input{width:100%;box-sizing:border-box;padding:3px}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{background:#f6f9fc;border-left:4px solid #4c72b0;padding:.4em .8em;min-width:150px}
.card .v{font-size:1.3em;font-weight:600}.card .k{font-size:.75em;color:#555}
.fig{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:1em;border-top:1px dashed #ddd;padding-top:.5em;margin-top:.8em}
.fig svg{width:100%;height:auto}.fig>div{min-width:0;overflow-x:auto}table{border-collapse:collapse;font-size:.75em}td,th{border:1px solid #ddd;padding:1px 5px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}#error{color:#b00020;white-space:pre-wrap}
h2{font-size:1.05em;margin:1em 0 .3em}.note{font-size:.8em;color:#555}button{margin-top:.8em;padding:.3em 1em}
</style></head><body>
<header><h1>kvledger — the KV-cache ledger and the serving/cost ledger</h1></header>
<main><form id="form" onsubmit="return false">
<label for="model">model</label><select id="model" name="model"></select>
<label for="gpu">GPU</label><select id="gpu" name="gpu"></select>
<label for="engine">engine</label><select id="engine" name="engine"></select>
<label for="tp">tensor parallel (TP)</label><input id="tp" name="tp" type="number" min="1" value="1">
<label for="max_model_len">context: max_model_len (tokens, e.g. 32K; empty = config)</label><input id="max_model_len" name="max_model_len">
<label for="kv_cache_dtype">KV cache dtype</label><select id="kv_cache_dtype" name="kv_cache_dtype"></select>
<label for="slo">SLOs</label><input id="slo" name="slo" value="ttft=200ms,tpot=50ms">
<label for="api">API price row</label><select id="api" name="api"></select>
<label for="trace">traffic (trace)</label><select id="trace" name="trace"></select>
<label for="monthly_tokens">volume: tokens per month (e.g. 3e8)</label><input id="monthly_tokens" name="monthly_tokens" value="3e8">
<label for="utilization">utilization override (0–1]; empty = the volume's</label><input id="utilization" name="utilization" type="number" step="0.05">
<label for="num_requests">requests per simulation (the CLI's default: __SERVING_NUM_REQUESTS__)</label><input id="num_requests" name="num_requests" type="number" value="__SERVING_NUM_REQUESTS__">
<button id="run-serving" type="button">compute capacity and cost</button>
<p class="note">The plan updates as you change a field; capacity and cost run the simulator (vLLM rules) when you press the button.</p>
</form>
<div><div id="status" data-version="0" data-latest="0" data-painted="0">loading</div><div id="error"></div>
<h2>KV-cache ledger</h2><div class="cards" id="plan-cards"></div>
<h2>Serving and cost</h2><div class="cards" id="serving-cards"><p class="note">press "compute capacity and cost"</p></div>
<div id="plan-figs"></div><div id="serving-figs"></div></div></main>
<script>
const TOKEN = __KVLEDGER_TOKEN__;
const $ = (id) => document.getElementById(id);
let version = 0;
// each panel: the id of the latest request sent, and the controller that aborts the one before it
const latest = {plan: 0, serving: 0}, inflight = {plan: null, serving: null};
function fill(id, items, value) { const s = $(id); s.innerHTML = ""; for (const it of items) { const o = document.createElement("option");
  o.value = typeof it === "string" ? it : it.id; o.textContent = typeof it === "string" ? it : it.name; s.appendChild(o); } if (value) s.value = value; }
function body(keys) { const b = {}; for (const k of keys) { const v = $(k).value; if (v !== "") b[k] = v; } return b; }
function card(key, label, value, raw) { return `<div class="card" id="${key}" data-value="${raw === null || raw === undefined ? "" : raw}"><div class="v">${value}</div><div class="k">${label}</div></div>`; }
function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c])); }
function figs(target, figures) { let h = ""; for (const [k, f] of Object.entries(figures)) {
  const rows = f.rows.map((r) => "<tr>" + r.map((c) => `<td>${esc(c)}</td>`).join("") + "</tr>").join("");
  h += `<section class="fig" id="fig-${k}" data-figure="${k}"><div>${f.svg}</div><div><b>${esc(f.title)}</b><p class="note">${esc(f.caption)}</p>` +
       `<table><tr>${f.headers.map((x) => `<th>${esc(x).replace(/_/g, "_<wbr>")}</th>`).join("")}</tr>${rows}</table>` +
       `<p class="note">Sources: ${f.sources.map(esc).join("; ")}</p></div></section>`; } $(target).innerHTML = h; }
async function get(path) { const r = await fetch(path, {headers: {"X-Kvledger-Token": TOKEN}}); const d = await r.json(); if (!r.ok) throw new Error(d.error || r.statusText); return d; }
// POST the inputs with a new request id, aborting the panel's earlier request; null when a newer one has been sent
async function post(kind, inputs) {
  const id = ++latest[kind]; if (inflight[kind]) inflight[kind].abort(); const ctl = new AbortController(); inflight[kind] = ctl;
  $("status").dataset.latest = String(latest.plan);
  try { const r = await fetch("/api/" + kind, {method: "POST", signal: ctl.signal, body: JSON.stringify({...inputs, request_id: id}),
                                                headers: {"Content-Type": "application/json", "X-Kvledger-Token": TOKEN}});
    const d = await r.json(); if (id !== latest[kind]) return null;
    if (!r.ok) throw new Error(d.error || r.statusText);
    if (!d.request || d.request.request_id !== id) return null;  // an answer to another request: never painted
    return d;
  } catch (e) { if (e.name === "AbortError" || id !== latest[kind]) return null; throw e; } }
function done(kind, text, id) { version += 1; $("status").textContent = text; $("status").dataset.version = String(version);
  if (kind === "plan") $("status").dataset.painted = String(id); }
const fmt = (x, d) => x === null || x === undefined ? "—" : Number(x).toLocaleString("en-US", {maximumFractionDigits: d});
function conc(h, x, ctx) { if (!h.fits) return "does not fit"; if (x === null) return `— (${ctx} &gt; max_model_len)`; return fmt(x, 2); }
function answers(r) { return `answers: ${esc(r.model)} on ${esc(r.gpu)}, ${esc(r.engine || "vllm")}, TP ${esc(r.tp)}, max_model_len ${esc(r.max_model_len || "from the config")}, KV ${esc(r.kv_cache_dtype)}`; }
async function updatePlan() {
  $("status").textContent = "computing plan"; $("error").textContent = "";
  try { const d = await post("plan", body(["model", "gpu", "engine", "tp", "max_model_len", "kv_cache_dtype"]));
    if (d === null) return;
    const h = d.headline;
    $("plan-cards").innerHTML = card("kv-bytes-per-token", "KV bytes per token per GPU", fmt(h.kv_bytes_per_token, 0), h.kv_bytes_per_token) +
      card("available-kv-gib", "available KV memory, GiB", h.fits ? fmt(h.available_kv_gib, 2) + (h.available_kv_gib_range ?
           ` (${fmt(h.available_kv_gib_range[0], 2)}–${fmt(h.available_kv_gib_range[1], 2)})` : "") : "does not fit", h.available_kv_gib) +
      card("num-gpu-blocks", "KV blocks", h.fits ? fmt(h.num_gpu_blocks, 0) : "does not fit", h.num_gpu_blocks) +
      card("max-concurrency-8k", "max concurrency at 8K tokens", conc(h, h.max_concurrency_8k, "8K"), h.max_concurrency_8k) +
      card("max-concurrency-128k", "max concurrency at 128K tokens", conc(h, h.max_concurrency_128k, "128K"), h.max_concurrency_128k) +
      card("max-model-len", "max_model_len, tokens", fmt(h.max_model_len, 0), h.max_model_len) +
      `<p class="note" id="plan-verdict">${esc(h.verdict || "")}</p><p class="note" id="plan-request" data-request="${esc(JSON.stringify(d.request))}">${answers(d.request)}</p>`;
    figs("plan-figs", d.figures); done("plan", "plan ready", d.request.request_id);
  } catch (e) { $("error").textContent = e.message; done("plan", "error", latest.plan); } }
async function updateServing() {
  $("status").textContent = "simulating"; $("error").textContent = "";
  try { const d = await post("serving", body(["model", "gpu", "tp", "max_model_len", "kv_cache_dtype", "slo", "api", "trace", "utilization", "num_requests", "monthly_tokens"]));
    if (d === null) return;
    const h = d.headline;
    $("serving-cards").innerHTML = card("capacity", "SLO capacity, req/s", fmt(h.capacity_req_per_s, 3), h.capacity_req_per_s) +
      card("self-host-output", "self-hosted USD / 1M output tokens", fmt(h.self_host_usd_per_mtok_output, 4), h.self_host_usd_per_mtok_output) +
      card("api-output", "API USD / 1M output tokens", fmt(h.api_usd_per_mtok_output, 4), h.api_usd_per_mtok_output) +
      `<p class="note" id="verdict"><b>${esc(h.answer || h.verdict)}</b>. GPU price: ${esc(h.gpu_price)}</p>` +
      (h.error_band ? `<p class="note" id="error-band">Error band: ${esc(h.error_band)}</p>` : "") +
      `<p class="note" id="serving-requests">${fmt(h.num_requests, 0)} requests per simulation` +
      (h.num_requests === h.cli_num_requests ? " (as the CLI)" : ` (the CLI's report and cost --simulate use ${fmt(h.cli_num_requests, 0)}; fewer requests give a less certain capacity)`) +
      `; ${answers(d.request)}</p>`;
    figs("serving-figs", d.figures); done("serving", "serving ready", d.request.request_id);
  } catch (e) { $("error").textContent = e.message; done("serving", "error", latest.serving); } }
async function init() { const c = await get("/api/choices");
  fill("model", c.models, "meta-llama/Meta-Llama-3.1-8B"); fill("gpu", c.gpus, "nvidia_h100_sxm"); fill("engine", c.engines, "vllm");
  fill("kv_cache_dtype", c.kv_cache_dtypes, "auto"); fill("api", c.apis, "OpenAI:gpt-4.1"); fill("trace", c.traces, "azure-conv");
  for (const id of ["model", "gpu", "engine", "tp", "max_model_len", "kv_cache_dtype"]) $(id).addEventListener("change", updatePlan);
  $("run-serving").addEventListener("click", updateServing); await updatePlan(); }
init();
</script></body></html>
"""
