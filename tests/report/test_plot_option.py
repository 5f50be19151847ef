"""``--plot FILE`` on fp8-kv, spec-decode, goodput --target and experiment: the figure is written in the asked format,
its marks match the --json, and nothing is overwritten."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()
PERF = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
SPEC = ["spec-decode", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--draft-tokens", "4", "--acceptance", "0.8",
        "--draft-model", "meta-llama/Llama-3.2-3B"]


def _ok(args: list[str]):
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return res


def test_fp8_kv_plot_png(tmp_path):
    out = tmp_path / "fp8.png"
    _ok(["fp8-kv", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--concurrency", "16", "--plot", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_spec_decode_plot_marks_the_flip_of_the_json(tmp_path):
    out = tmp_path / "spec.svg"
    d = json.loads(_ok([*SPEC, "--json", "--plot", str(out)]).stdout)
    # the figure marks the flip the JSON gives (with Llama-3.2-3B drafting for the 8B on an H100, a few tens of
    # concurrent sequences at 2K tokens; docs/reference.md quotes the current figure)
    flip = next(f["flip_batch"] for f in d["flips"] if f["context_tokens"] == d["context_tokens"])
    assert 1 < flip < 1024
    svg = out.read_text(encoding="utf-8")
    assert svg.startswith("<svg") and f"flip at {flip:,} sequences" in svg


def test_goodput_target_plot_marks_the_boundary(tmp_path):
    files = sorted(str(p) for p in PERF.glob("stage_*_lifecycle_metrics.json"))
    out = tmp_path / "b.svg"
    res = _ok(["goodput", *files, "--slo", "ttft=100ms,tpot=10ms", "--target", "0.9", "--json", "--plot", str(out)])
    b = json.loads(res.stdout.strip().splitlines()[-1])["boundary"]
    assert f"boundary {b['boundary_value']:g}" in out.read_text(encoding="utf-8")


def test_experiment_plot_pdf(tmp_path):
    out = tmp_path / "kv.pdf"
    _ok(["experiment", "kv-waste", "--quick", "--json", "--plot", str(out)])
    assert out.read_bytes()[:5] == b"%PDF-"


def test_plot_refusals(tmp_path):
    existing = tmp_path / "x.png"
    existing.write_bytes(b"mine")
    for args in (["fp8-kv", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--plot", str(existing)],
                 ["fp8-kv", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--plot", str(tmp_path / "x.jpg")],
                 ["goodput", str(PERF / "stage_1_lifecycle_metrics.json"), "--slo", "ttft=100ms", "--plot",
                  str(tmp_path / "y.png")]):
        res = runner.invoke(app, args)
        assert res.exit_code != 0 and re.search(r"refusing to overwrite|ending in|add --target",
                                                str(res.exception)), args
    assert existing.read_bytes() == b"mine"
