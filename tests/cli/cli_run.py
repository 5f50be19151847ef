"""Running a kvledger command in-process for the CLI tests: its result, or the message of the error it ends with."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import KvLedgerError

MODEL = "meta-llama/Llama-3.1-8B"
_runner = CliRunner()


def run_cli(*args: str, columns: int = 250):
    """The command's result (exceptions propagate), at a ``columns``-wide console (250) so lines are not wrapped."""
    return _runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": str(columns)})


def cli_json(*args: str) -> dict:
    """The JSON document ``kvledger *args`` writes to stdout with ``--json`` (added when not among ``args``), once the
    command exited 0; strict JSON: a NaN or Infinity fails the test (kvledger's serializer writes null)."""
    argv = args if "--json" in args else (*args, "--json")
    res = run_cli(*argv)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout, parse_constant=_no_constant)


def strict_json_file(path) -> dict:
    """The JSON document a command wrote to ``path`` (``--out``), strict as ``cli_json``'s: a test that needs a
    command's text and its JSON runs it once with ``--out`` (the same document ``--json`` prints)."""
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)


def _no_constant(name: str) -> None:
    raise AssertionError(f"--json wrote {name}, not strict JSON")


def refused(*args: str) -> str:
    """The message of the error the command ends with (the console entry prints it and exits with status 2)."""
    with pytest.raises(KvLedgerError) as err:
        run_cli(*args)
    return str(err.value)


def records_file(tmp_path):
    """A simulation-like records file (DistServe's 10 → 3 example): 100 requests in 10 s, 30 within TTFT ≤ 200 ms,
    1000 input / 100 output tokens each, on 1 GPU; its path."""
    from kvledger.evidence import write_records
    from kvledger.records import RequestRecord, RunMetadata, RunRecords

    recs = [RequestRecord(str(i), i * 0.1, 1000, 100, i * 0.1 + (0.1 if i < 30 else 0.4),
                          i * 0.1 + 1.0) for i in range(100)]
    run = RunRecords(recs, RunMetadata("simulator", "simulator", model="m", num_gpus=1, duration_s=10.0))
    return write_records(run, tmp_path / "sim" / "records.json")


def write_gpu_profile(path, gpu: str, model: str, flops_fraction: float = 0.5, bandwidth_fraction: float = 0.6):
    """A hand-written GPU profile at ``path`` (``flops_fraction`` of peak FLOP/s, ``bandwidth_fraction`` of peak
    bandwidth on ``gpu``, the catalog name), fitted on one run "myrun" of ``model`` at TP 1; returns ``path``."""
    path.write_text(json.dumps({"kind": "kvledger-gpu-profile", "version": 1, "gpu": gpu,
                                "flops_fraction": flops_fraction, "bandwidth_fraction": bandwidth_fraction,
                                "runs": [{"label": "myrun", "source": "my/run", "model": model, "tp": 1}]}))
    return path
