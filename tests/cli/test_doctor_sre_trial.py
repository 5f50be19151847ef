"""`kvledger doctor` on an SRE's trial logs (vLLM 0.19.0, Llama-3.1-70B-Instruct-FP8, TP 4 on H100s; synthetic edits
of one real start-up, tests/fixtures/vllm_logs/README.md): earlier start-ups summarised, no advice the crash
contradicts, a log read from standard input, a --max-num-batched-tokens value for preemptions below a full cache, and
a log that contradicts itself."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

FIX = Path(__file__).parents[1] / "fixtures"
LOGS = FIX / "vllm_logs"
MODEL = FIX / "configs" / "Llama-3.1-70B-Instruct-FP8.json"
runner = CliRunner(env={"COLUMNS": "250"})


def trial(name: str) -> Path:
    return LOGS / f"sre_trial_v0.19_llama70b_fp8_tp4_{name}.log"


def doctor(*args: object, stdin: bytes | None = None):
    return runner.invoke(app, ["doctor", *map(str, args), "--model", str(MODEL), "--gpu", "H100"], input=stdin,
                         catch_exceptions=False)


def test_a_dash_reads_the_log_from_standard_input():
    # `cat log | kvledger doctor -` said "-: no such file"; the piped log reads as the file does (same verdict, same
    # exit status 1: the CUDA OOM at line 486 of this copy), under the name <stdin>
    path = trial("crash")
    piped, named = doctor("-", stdin=path.read_bytes()), doctor(path)
    assert piped.exit_code == named.exit_code == 1
    assert piped.stdout.startswith("kvledger doctor <stdin>: vLLM 0.19.0")
    assert piped.stdout.split("\n", 1)[1] == named.stdout.split("\n", 1)[1]
    empty = runner.invoke(app, ["doctor", "-"], input=b"")  # main() turns an InputError into exit status 2
    assert isinstance(empty.exception, InputError) and str(empty.exception) == "<stdin>: standard input is empty"
