"""Golden outputs: a fixed set of `kvledger ... --json` commands whose stdout is committed under tests/golden/.

    python benchmarks/golden.py            # compare every command with its committed output (exit 1 on a difference)
    python benchmarks/golden.py --write    # rewrite the committed outputs (after a deliberate change of behaviour)
    python benchmarks/golden.py --only plan_llama8b_h100

A refactor that claims "behaviour unchanged" must leave every output byte-identical. The fast subset also
runs in the test suite (tests/test_golden.py); the whole set takes about a minute on two cores.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
EV = "tests/evidence/data"
L8 = "meta-llama/Llama-3.1-8B"

# name -> (argv after `kvledger`, fast: part of the test suite)
COMMANDS: dict[str, tuple[list[str], bool]] = {
    "plan_llama8b_h100": (["plan", L8, "--gpu", "H100-SXM", "--context", "8K,128K", "--json"], True),
    "plan_dsv3_h200_tp8": (["plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--json"], True),
    "plan_llama8b_pp4_v019": (["plan", L8, "--gpu", "H100", "--pp", "4", "--engine-version", "0.19.0", "--json"], True),
    "plan_gptoss20b_sglang": (["plan", "openai/gpt-oss-20b", "--gpu", "H100", "--engine", "sglang", "--json"], True),
    "simulate_azure_conv": (["simulate", L8, "--gpu", "H100-SXM", "--trace", "azure-conv", "--num-requests", "2000",
                             "--json"], True),
    "simulate_sglang": (["simulate", L8, "--gpu", "H100-SXM", "--trace", "azure-conv", "--num-requests", "800",
                         "--policy", "sglang", "--json"], True),
    "simulate_mooncake_2rep": (["simulate", L8, "--gpu", "H100-SXM", "--trace", "mooncake", "--num-requests", "800",
                                "--replicas", "2", "--router", "prefix_aware", "--json"], True),
    "goodput_aiperf": (["goodput", f"{EV}/aiperf/run1_profile_export.jsonl", "--slo", "ttft=900ms,tpot=33.2ms",
                        "--json"], True),
    "goodput_sim_rate": (["goodput", "--simulate", L8, "--gpu", "H100", "--trace", "azure-conv", "--num-requests",
                          "400",
                          "--slo", "ttft=200ms,tpot=30ms", "--target", "0.9", "--axis", "rate", "--json"], False),
    "cost_llmperf": (["cost", f"{EV}/llmperf/leaderboard_individual_anyscale_70b.json", "--slo", "ttft=500ms,tpot=50ms",
                      "--api", "OpenAI:gpt-4.1", "--utilization", "0.5", "--gpu", "H100", "--gpu-provider", "Nebius",
                      "--num-gpus", "4", "--json"], True),
    "cost_simulate": (["cost", "--simulate", L8, "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "400",
                       "--slo", "ttft=200ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--utilization", "0.5",
                       "--gpu-provider", "Nebius", "--json"], False),
    "search_llama8b_h100": (["search", L8, "--slo", "ttft=500ms,tpot=50ms", "--gpus", "H100", "--tp", "1,2",
                             "--rate", "30", "--json"], False),
    "report_llama8b_h100": (["report", L8, "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms", "--api", "OpenAI:gpt-4.1",
                             "--out", "/tmp/kvledger-golden/report.html", "--force", "--json"], False),
    "doctor_preemptions": (["doctor", "tests/fixtures/vllm_logs/constructed_v1_preemptions_at_full_kv.log", "--model",
                            L8,
                            "--gpu", "H100", "--json"], True),
    "fp8_kv": (["fp8-kv", L8, "--gpu", "H100-SXM", "--concurrency", "64", "--json"], True),
    "spec_decode": (["spec-decode", L8, "--gpu", "H100-SXM", "--draft-tokens", "4", "--acceptance", "0.8",
                     "--draft-model", "meta-llama/Llama-3.2-3B", "--json"], True),
    "kv_eviction": (["kv-eviction", L8, "--gpu", "H100-SXM", "--evict", "0.9", "--layout", "scattered", "--context",
                     "32K",
                     "--json"], True),
    "experiment_batching": (["experiment", "batching", "--json"], False),
}


def run(argv: list[str]) -> tuple[int, str]:
    Path("/tmp/kvledger-golden").mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONHASHSEED="0", COLUMNS="120")
    proc = subprocess.run([sys.executable, "-m", "kvledger.cli.main", *argv], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=600)
    return proc.returncode, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--fast", action="store_true", help="only the commands the test suite runs")
    args = ap.parse_args()
    bad = 0
    for name, (argv, fast) in COMMANDS.items():
        if (args.only and name not in args.only) or (args.fast and not fast):
            continue
        rc, out = run(argv)
        text = f"# rc={rc}\n{out}"
        path = GOLDEN / f"{name}.out"
        if args.write:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)} (rc {rc}, {len(out)} chars)")
            continue
        want = path.read_text() if path.exists() else ""
        if text == want:
            print(f"same  {name}")
            continue
        bad += 1
        print(f"DIFF  {name}")
        diff = difflib.unified_diff(want.splitlines(True), text.splitlines(True), "golden", "now")
        sys.stdout.writelines(line[:400] + ("…\n" if len(line) > 400 else "") for line in list(diff)[:40])
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
