"""Every command that writes a file: an input is never replaced (even with --force), a write is atomic (a failed
rename leaves the previous file whole and no temporary file), an unwritable folder is refused before the work."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvledger.outputs
from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
AIPERF = DATA / "aiperf/run1_profile_export.jsonl"
STAGES = [str(DATA / f"inference-perf/stage_{i}_lifecycle_metrics.json") for i in range(7)]
TRACE_LINE = '{"arrival_s": 0, "num_prompt_tokens": 100, "num_output_tokens": 10}\n'
DISTSERVE = ["--model", "facebook/opt-13b", "--gpu", "A100-80GB", "--engine-version", "0.5.0",
             "--gpu-memory-utilization", "0.95", "--max-num-batched-tokens", "16384", "--max-num-seqs", "1024",
             "--max-model-len", "2048", "--batching", "vllm_v0", "--max-paddings", "256",
             "--no-enable-chunked-prefill", "--no-enable-prefix-caching", "--no-leave-one-out"]
SEARCH = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1",
          "--max-model-len", "8K", "--num-requests", "60", "--utilization", "0.5"]
REPORT = ["report", "meta-llama/Llama-3.2-3B", "--gpu", "H100", "--slo", "ttft=2s,tpot=100ms",
          "--api", "OpenAI:gpt-4.1", "--num-requests", "50"]


def _trace(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.json").write_text(TRACE_LINE)
    return folder / "trace.json"


# each command that writes a file: argv writing to OUT (a file, or a folder for simulate --out / report --png),
# whether it takes --force, and whether OUT is a folder
def _argv(cmd: str, out: Path, tmp: Path) -> list[str]:
    trace = str(_trace(tmp / "in"))
    return {
        "simulate --out": ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", trace, "--out", str(out)],
        "report --out": [*REPORT, "--out", str(out)],
        "report --png": [*REPORT, "--out", str(tmp / "r.html"), "--png", str(out)],
        "search --csv": [*SEARCH, "--csv", str(out)],
        "search --plot": [*SEARCH, "--plot", str(out)],
        "search --ledger": [*SEARCH, "--ledger", str(out)],
        "goodput --out": ["goodput", str(AIPERF), "--slo", "ttft=1s", "--out", str(out)],
        "goodput --plot": ["goodput", *STAGES, "--slo", "ttft=100ms,tpot=10ms", "--target", "0.9", "--plot", str(out)],
        "cost --out": ["cost", str(AIPERF), "--slo", "ttft=4s", "--api", "OpenAI:gpt-4.1", "--gpu-usd-per-hour", "2.5",
                       "--num-gpus", "1", "--utilization", "0.6", "--out", str(out)],
        "fp8-kv --plot": ["fp8-kv", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--contexts", "1K", "--plot", str(out)],
        "spec-decode --plot": ["spec-decode", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-k", "4", "--acceptance",
                               "0.8", "--rates", "1", "--plot", str(out)],
        "calibrate --out": ["calibrate", "distserve:vllm-100-1", *DISTSERVE, "--out", str(out)],
    }[cmd]


FORCE = {"simulate --out", "report --out", "report --png", "search --csv", "search --plot", "search --ledger",
         "goodput --out", "goodput --plot", "cost --out", "calibrate --out"}
FOLDER = {"simulate --out", "report --png"}
SUFFIX = {"search --csv": ".csv", "search --plot": ".png", "goodput --plot": ".png", "fp8-kv --plot": ".svg",
          "spec-decode --plot": ".svg", "report --out": ".html", "search --ledger": ".jsonl"}
COMMANDS = sorted({*FORCE, "fp8-kv --plot", "spec-decode --plot"})
FIRST_FILE = {"simulate --out": "summary.json", "report --png": "kv_share.png"}


@pytest.fixture
def unwritable(tmp_path):
    """A folder no file can be created in: mode 0555 for a normal user; for root (who ignores modes) sysfs, where
    creating a file is refused for everyone."""
    if os.geteuid() != 0:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    if os.access("/sys", os.W_OK) and Path("/sys/class").is_dir():
        try:
            fd = os.open("/sys/kvledger-probe", os.O_CREAT | os.O_WRONLY)
        except OSError:
            yield Path("/sys")
            return
        os.close(fd)
        os.unlink("/sys/kvledger-probe")
    pytest.skip("running as root with no folder that refuses writes")


def _target(cmd: str, folder: Path) -> Path:
    return folder / ("out" if cmd in FOLDER else "out" + SUFFIX.get(cmd, ".json"))


@pytest.mark.parametrize("cmd", COMMANDS)
def test_an_unwritable_folder_is_refused_before_the_work(cmd, tmp_path, unwritable):
    out = unwritable if cmd in FOLDER else _target(cmd, unwritable)
    res = runner.invoke(app, _argv(cmd, out, tmp_path))
    assert isinstance(res.exception, InputError), res.output
    assert "cannot write there" in str(res.exception) and "Nothing was run" in str(res.exception)


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if not c.startswith("spec-decode")])  # spec-decode reads no file
def test_an_input_is_never_replaced_even_with_force(cmd, tmp_path):
    argv = _argv(cmd, tmp_path / "placeholder", tmp_path)
    trace = tmp_path / "in" / "trace.json"
    # the output named as one of the command's own inputs: the trace, the benchmark file, the profile source
    if cmd in FOLDER:
        victim, out = trace, trace.parent  # the folder that holds the input
        argv += ["--trace", str(trace)] if cmd.startswith("report") else []
    elif cmd.startswith(("goodput", "cost")):  # (a plot's input named like a plot: the suffix check comes first)
        victim = tmp_path / ("bench" + SUFFIX.get(cmd, ".jsonl"))
        victim.write_bytes(AIPERF.read_bytes())
        argv[1] = str(victim)
        out = victim
    elif cmd.startswith(("search", "report")):
        victim = out = trace.with_suffix(SUFFIX.get(cmd, ".json"))
        victim.write_text(TRACE_LINE)
        argv += ["--trace", str(victim)]
    elif cmd == "fp8-kv --plot":
        victim = out = tmp_path / "cal.svg"
        victim.write_text("context_tokens,batch,bf16_tok_per_s_per_seq,fp8_tok_per_s_per_seq\n1024,8,100,110\n")
        argv += ["--calibration", str(victim)]
    elif cmd == "calibrate --out":
        victim = tmp_path / "bench.jsonl"
        victim.write_bytes(AIPERF.read_bytes())
        argv[1] = str(victim)
        out = victim
    else:
        raise AssertionError(f"no input to protect for {cmd}")
    before = victim.read_bytes()
    i = argv.index(str(tmp_path / "placeholder"))
    argv[i] = str(out)
    res = runner.invoke(app, argv + (["--force"] if cmd in FORCE else []))
    assert isinstance(res.exception, InputError), res.output
    assert "input of this command" in str(res.exception)
    assert victim.read_bytes() == before


def test_simulate_out_force_into_the_traces_folder_keeps_the_trace(tmp_path):
    # the case: `simulate --trace d/trace.json --out d --force` used to leave records, steps, summary and no
    # trace.json. Now it is refused before the work and the folder is as it was.
    d = tmp_path / "d"
    trace = _trace(d)
    res = runner.invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", str(trace),
                              "--out", str(d), "--force"])
    assert isinstance(res.exception, InputError) and "holds trace.json" in str(res.exception)
    assert sorted(p.name for p in d.iterdir()) == ["trace.json"] and trace.read_text() == TRACE_LINE


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c != "report --png"])  # its PNGs: the same write, slow
def test_a_failed_write_leaves_the_previous_file_whole(cmd, tmp_path, monkeypatch):
    folder = tmp_path / "w"
    folder.mkdir()
    out = _target(cmd, folder)
    first = (out / FIRST_FILE[cmd]) if cmd in FOLDER else out
    if cmd in FORCE:  # a previous result, replaced only by a complete new one
        first.parent.mkdir(exist_ok=True)
        first.write_text("previous")

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(kvledger.outputs.os, "replace", full_disk)
    res = runner.invoke(app, _argv(cmd, out, tmp_path) + (["--force"] if cmd in FORCE else []))
    assert isinstance(res.exception, InputError), res.output
    assert "No space left on device" in str(res.exception)
    if cmd in FORCE:
        assert first.read_text() == "previous"
    else:
        assert not out.exists()
    assert not [p.name for p in first.parent.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_write_atomic_replaces_only_with_a_complete_file(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("old")

    def half(tmp):
        Path(tmp).write_text("ne")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        kvledger.outputs.write_atomic(f, half)
    assert f.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]
    kvledger.outputs.write_text_atomic(f, "new")
    assert f.read_text() == "new"


@pytest.mark.parametrize("argv", [
    ["goodput", "--simulate", "{model}", "--gpu", "H100", "--trace", "{trace}", "--slo", "ttft=2s", "--out", "{out}"],
    ["report", "{model}", "--gpu", "H100", "--trace", "{trace}", "--slo", "ttft=2s", "-o", "{out}"],
    ["search", "{model}", "--slo", "ttft=2s", "--gpus", "H100", "--trace", "{trace}", "--csv", "{out}"],
    ["cost", "--simulate", "{model}", "--gpu", "H100", "--trace", "{trace}", "--slo", "ttft=2s",
     "--monthly-tokens", "1e9", "--out", "{out}"],
])
@pytest.mark.parametrize("target", ["model", "trace"])
def test_no_command_replaces_the_model_config_or_the_trace_it_was_given_even_with_force(tmp_path, argv, target):
    # fresh-user trial: `goodput --simulate model.json --trace trace.csv --out trace.csv --force` replaced the trace
    # (and --out model.json the model config; report -o and search --csv the same): only FILE arguments and a few
    # named flags were counted as inputs. Now every path a command is given is (cli/outputs.py: paths_in).
    model = tmp_path / "model.json"
    model.write_text('{"model_type": "llama"}')  # never read: the outputs are checked first
    trace = _trace(tmp_path)
    files = {"model": model, "trace": trace}
    before = {k: p.read_bytes() for k, p in files.items()}
    args = [a.format(model=model, trace=trace, out=files[target]) for a in argv] + ["--force"]
    res = runner.invoke(app, args, env={"COLUMNS": "250"})
    assert isinstance(res.exception, InputError), res.output
    assert "is also an input of this command" in " ".join(str(res.exception).split())
    assert {k: p.read_bytes() for k, p in files.items()} == before


@pytest.mark.parametrize("scope", ["gpu", "model"])
@pytest.mark.parametrize("target", ["requests.jsonl", "timeseries.csv"])
def test_a_file_inside_a_run_folder_given_as_input_is_never_replaced_even_with_force(tmp_path, scope, target):
    # `calibrate run --out run/requests.jsonl --force` (a fresh-user trial): the run folder is read whole, so each of
    # its files is an input (evidence.sidecars: a folder's files), refused as the output location, nothing run
    import json

    run = tmp_path / "run"
    run.mkdir()
    reqs = [{"request_id": f"r{i}", "input_toks": 100, "output_toks": 4, "queued_ts": 1.0 + i,
             "first_token_ts": 1.1 + i, "last_token_ts": 1.2 + i} for i in range(3)]
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reqs))
    (run / "meta.json").write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B"}))
    (run / "timeseries.csv").write_text("t,running\n0,1\n")
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    res = CliRunner().invoke(app, ["calibrate", "--scope", scope, str(run), "--gpu", "H100", "--out",
                                   str(run / target), "--force"])
    assert isinstance(res.exception, InputError) and "is also an input of this command" in str(res.exception)
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
