"""A head of platform's fresh-user trial (build vs buy): report's --out refuses what it cannot write, report takes
cost's --instance, the replicas × GPUs wording, and a bought GPU's bill through the per-token ledgers."""

from __future__ import annotations

from cli_run import refused, run_cli

REPORT = ["report", "meta-llama/Llama-3.2-3B", "--gpu", "H100", "--slo", "ttft=2s,tpot=100ms", "--api",
          "OpenAI:gpt-4.1", "--num-requests", "50"]


def test_report_refuses_an_out_it_cannot_write_before_any_work(tmp_path):
    pdf = tmp_path / "r.pdf"
    msg = refused(*REPORT, "-o", str(pdf))
    assert msg.startswith(f"--out {pdf}: the report writes one self-contained HTML file")
    assert "not a .pdf file" in msg and "ending in .html or .htm" in msg and msg.endswith("Nothing was run.")
    assert not pdf.exists()
    # an unknown model would fail later: the suffix is refused first, so nothing was planned or simulated
    assert refused("report", "no-such/model", *REPORT[2:], "-o", str(pdf)) == msg
    assert "without a suffix" in refused(*REPORT, "-o", str(tmp_path / "r"))


def test_report_never_replaces_a_file_without_force_nor_an_input_even_with_it(tmp_path):
    old = tmp_path / "r.html"
    old.write_text("mine")
    assert refused(*REPORT, "-o", str(old)).startswith(f"--out {old} already exists; refusing to overwrite it")
    trace = tmp_path / "t.html"  # a trace named .html: the output check still knows it is an input
    trace.write_text('{"arrival_s": 0, "num_prompt_tokens": 100, "num_output_tokens": 10}\n')
    assert "is also an input of this command" in refused(*REPORT, "--trace", str(trace), "-o", str(trace), "--force")
    assert old.read_text() == "mine" and trace.read_text().startswith('{"arrival_s"')
