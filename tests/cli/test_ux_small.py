"""Four things a fresh-user trial found: `kvledger gpus` printed no source per row (its --json did); validate and
calibrate took an alias such as RTX-PRO-6000 silently (simulate and plan name the row it picked); a file of an unknown
format got ~15 lines listing every format; an LLMServingSim run's meta.json got "unknown format" without a word about
the run's folder or its requests.jsonl beside it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import run_cli
from typer.testing import CliRunner

from kvledger.catalog.gpus import gpu_catalog
from kvledger.cli.main import app
from kvledger.errors import FormatError

RUNS = Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs" / "llmservingsim" / "bench"
PRO = RUNS / "examples" / "RTXPRO6000" / "Llama-3.1-8B" / "vllm"
needs_shared = pytest.mark.skipif(not PRO.is_dir(), reason="../shared/data/measured-runs not beside the clone")
SERVER_NOTE = ("note: --gpu RTX-PRO-6000 → NVIDIA RTX PRO 6000 Blackwell Server Edition (also: RTX PRO 6000 Blackwell "
               "Workstation Edition (--gpu rtx-pro-6000-workstation); name one to choose)")


def _gpus(columns: int) -> str:
    return CliRunner().invoke(app, ["gpus"], catch_exceptions=False, env={"COLUMNS": str(columns)}).stdout


def _legend(out: str) -> dict[int, str]:
    """The numbered sources under the table: number → "key[ + key] (confidence)"."""
    text = " ".join(out[out.index("sources (gpus.csv's datasheet_ref keys"):].split())
    body = text.split("): ", 1)[1]
    return {int(e.split("] ", 1)[0].lstrip("[")): e.split("] ", 1)[1] for e in body.split("; ")}


def test_gpus_prints_each_rows_source_from_the_catalog():
    # gpus.csv order, one number per new (datasheet_ref, confidence): A10 [1], A10G [2], L4 [3], L40S [4], the three
    # A100 rows [5] (nvidia_a100_datasheet, high), H100 SXM [6], H100 PCIe [7] (two keys: datasheet and product brief)
    out = _gpus(250)
    rows = {ln.split("│")[1].strip(): ln.split("│")[-2].strip() for ln in out.splitlines() if ln.startswith("│ ")}
    assert rows["nvidia_a100_40gb_sxm"] == rows["nvidia_a100_80gb_pcie"] == "[5]"
    assert rows["nvidia_h100_sxm"] == rows["nvidia_h100_nvl"] == "[6]" and rows["nvidia_h100_pcie"] == "[7]"
    legend = _legend(out)
    assert legend[6] == "nvidia_h100_datasheet (high)"
    assert legend[7] == "nvidia_h100_datasheet + nvidia_h100_pcie_product_brief (high)"
    # every row of the catalog has a number, and its number's entry is that row's datasheet_ref and confidence
    cat = gpu_catalog()
    assert set(rows) == set(cat)
    for gid, g in cat.items():
        n = int(rows[gid].strip("[]"))
        assert legend[n] == f"{' + '.join(g.datasheet_ref.split(';'))} ({g.confidence})"


def test_gpus_on_a_narrow_terminal_puts_the_source_after_the_id_and_stays_a_table():
    out = _gpus(80)
    assert "│ nvidia_h100_pcie [7]" in out and "┃ id" in out  # a table, not the one-row-per-block fallback
    assert "[7] nvidia_h100_datasheet + nvidia_h100_pcie_product_brief (high)" in " ".join(out.split())
    assert "[n] after the id: the row's source below" in " ".join(out.split())


def _three_requests(d: Path) -> None:
    """Three requests (1,000 prompt tokens, 4 output tokens, 1 s apart; TTFT 100 ms, E2E 200 ms) in d/requests.jsonl
    and the meta.json LLMServingSim's runner writes beside it (keys as in the RTX 4090 run's)."""
    reqs = [{"request_id": f"r{i}", "input_toks": 1000, "output_toks": 4, "queued_ts": 1.0 + i,
             "first_token_ts": 1.1 + i, "last_token_ts": 1.2 + i} for i in range(3)]
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reqs))
    (d / "meta.json").write_text(json.dumps({"schema_version": 1, "model": "meta-llama/Llama-3.1-8B",
                                             "vllm_version": "0.19.0", "engine_kwargs": {"max_num_seqs": 128}}))


@pytest.mark.parametrize("cmd", ["validate", "calibrate"])
def test_validate_and_calibrate_name_the_row_an_alias_picked(tmp_path, cmd):
    # "RTX-PRO-6000" answers to the Server Edition (picked: its alias) and the Workstation Edition; plan and simulate
    # printed this note, validate and calibrate did not
    _three_requests(tmp_path)
    extra = ["--scope", "gpu", "--no-leave-one-out"] if cmd == "calibrate" else []
    out = run_cli(cmd, str(tmp_path / "requests.jsonl"), "--gpu", "RTX-PRO-6000", *extra).stdout
    assert SERVER_NOTE in out
    # a name that picks one row prints no note
    out = run_cli(cmd, str(tmp_path / "requests.jsonl"), "--gpu", "rtx-pro-6000-server", *extra).stdout
    assert "note: --gpu" not in out


@needs_shared
def test_validate_the_real_rtx_pro_6000_run_names_the_server_edition():
    out = run_cli("validate", str(PRO), "--gpu", "RTX-PRO-6000").stdout
    assert SERVER_NOTE in out


def test_a_meta_json_given_for_the_run_points_at_its_folder_and_request_file(tmp_path):
    _three_requests(tmp_path)
    res = CliRunner().invoke(app, ["validate", str(tmp_path / "meta.json"), "--gpu", "H100"])
    assert isinstance(res.exception, FormatError) and res.exit_code != 0
    msg = str(res.exception)
    assert (f"This meta.json is a file of an LLMServingSim run, not its per-request file: give calibrate or validate "
            f"the run's folder, {tmp_path}, or its request file in it, requests.jsonl, instead.") in msg
    # the same run's folder and request file are read
    assert run_cli("validate", str(tmp_path), "--gpu", "H100").exit_code == 0


def test_a_lone_llmservingsim_meta_json_says_what_it_is(tmp_path):
    _three_requests(tmp_path)
    (tmp_path / "requests.jsonl").unlink()
    res = CliRunner().invoke(app, ["calibrate", str(tmp_path / "meta.json"), "--gpu", "H100"])
    assert isinstance(res.exception, FormatError)
    assert ("This looks like an LLMServingSim run's meta.json (its launch record, read beside the run's "
            "requests.jsonl), and no requests.jsonl is beside it") in str(res.exception)


@needs_shared
@pytest.mark.parametrize("rel", ["vllm/meta.json", "vllm/timeseries.csv", "validation/summary.txt"])
def test_the_real_runs_other_files_point_at_its_request_file(rel):
    run = PRO.parent
    res = CliRunner().invoke(app, ["validate", str(run / rel), "--gpu", "H100"])
    assert isinstance(res.exception, FormatError)
    assert (f"give calibrate or validate the run's folder, {run / 'vllm'}, or its request file in it, requests.jsonl, "
            "instead") in str(res.exception)


def test_unknown_format_is_one_short_paragraph_exit_2_no_traceback(tmp_path):
    # the console entry (not the in-process runner): status 2, one "error:" paragraph, no traceback; before, 15 lines
    p = tmp_path / "mystery.json"
    p.write_text('{"hello": 1}')
    proc = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "validate", str(p), "--gpu", "H100"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert proc.stderr.startswith(f"error: {p}: unknown benchmark output format. Keys seen: hello. kvledger reads 14 "
                                  "formats")
    assert proc.stderr.strip().endswith("`kvledger goodput --help` names them (goodput and cost force one with "
                                        "--format NAME).")


def test_inference_perf_manifests_name_the_stage_reports_beside_them(tmp_path):
    (tmp_path / "results").mkdir()
    for i in range(4):
        (tmp_path / "results" / f"stage_{i}_lifecycle_metrics.json").write_text("{}")
    (tmp_path / "manifests.yaml").write_text("- apiVersion: v1\n  kind: Pod\n")
    res = CliRunner().invoke(app, ["validate", str(tmp_path / "manifests.yaml"), "--gpu", "H100"])
    assert ("This manifests.yaml holds an inference-perf run's Kubernetes manifests, read beside the stage reports: "
            "give a stage_N_lifecycle_metrics.json; beside it: results/stage_0_lifecycle_metrics.json, "
            "results/stage_1_lifecycle_metrics.json, results/stage_2_lifecycle_metrics.json and 1 more.") in str(
                res.exception)
