"""validate/calibrate read the engine's resolved ``model_config`` and ``speculative_config`` that LLMServingSim's
meta.json records (vLLM 0.19's ``VllmConfig``): speculative decoding, or bitsandbytes on load, stated only there is
refused, as the same launch flags in ``engine_kwargs`` are; FP8 on load, stated there or by the launch, is replayed as
``simulate --quantization fp8`` plans it, the checkpoint telling an FP8 one (loaded as stored) from an unquantized one.

The runs: tests/calibration/data/llmservingsim_rtx4090_edits/ (SOURCES.md) — LLMServingSim's RTX 4090 Llama-3.1-8B
run as recorded, and two copies each with one value of its meta.json edited by hand (synthetic edits, marked there)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from kvledger.calibration.resolved_quant import resolved_quantization_notes
from kvledger.calibration.run_record import recorded_settings
from kvledger.cli.main import app
from kvledger.errors import InputError
from kvledger.evidence.llmservingsim import read_llmservingsim

RUNS = Path(__file__).resolve().parent / "data" / "llmservingsim_rtx4090_edits"
SPEC_REFUSAL = (": speculative decoding (a draft proposes several tokens that the model verifies in one step), which "
                "kvledger's replay does not model")
ON_LOAD = (": the weights are quantized as they load, which kvledger's replay does not model: it prices the "
           "checkpoint's own weights and plans the KV pool around them")


def _extra(name: str) -> dict:
    return read_llmservingsim(RUNS / name).metadata.extra


def test_the_run_as_recorded_keeps_its_model_config_and_is_refused_nothing():
    # meta.json's resolved model_config: quantization null, dtype "torch.bfloat16", enforce_eager false;
    # speculative_config null — kept, and nothing in them is refused or unapplied (bfloat16 is the checkpoint's dtype)
    resolved = _extra("as_recorded")["resolved_config"]
    assert resolved["model_config"] == {"quantization": None, "dtype": "torch.bfloat16", "enforce_eager": False}
    assert resolved["speculative_config"] is None
    rec = recorded_settings(_extra("as_recorded"))
    assert (rec.refused, rec.unapplied, rec.flags["enforce_eager"]) == ([], [], False)
    # read now, so no longer listed as unused; an unread resolved section still is
    note = rec.unused[0]
    assert "quant_config" in note and "model_config" not in note and "speculative_config" not in note


def test_speculative_decoding_stated_only_in_the_resolved_config_is_refused(cli_entry):
    rec = recorded_settings(_extra("speculative"))
    meta = RUNS / "speculative" / "meta.json"
    assert rec.refused == [
        f'{meta} records in its resolved config speculative_config {{"method": "ngram", "num_speculative_tokens": 3, '
        f'"prompt_lookup_max": 4, "prompt_lookup_min": 2, "m…{SPEC_REFUSAL}: it steps one token per sequence '
        "per step, so every latency and throughput it compares would be another engine's. kvledger "
        "spec-decode estimates speculative decoding's gain apart."]
    code, out, _ = cli_entry("validate", str(RUNS / "speculative"), "--json")
    assert code == 2 and json.loads(out)["error"]["type"] == "InputError" and SPEC_REFUSAL in out
    # a launch flag saying it too: refused once, as the flag (its sentence)
    extra = _extra("speculative")
    extra["engine_kwargs"] = {**extra["engine_kwargs"], "speculative_config": {"method": "ngram"}}
    assert [r.split(":")[0] for r in recorded_settings(extra).refused] == [
        f"{meta} launches vLLM with --speculative-config {{'method'"]


def _validate(path: Path) -> str:
    """``validate path``'s text, once it exited 0, its lines joined."""
    res = CliRunner().invoke(app, ["validate", str(path)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    return " ".join(res.stdout.split())


def _weights(path: Path) -> tuple[str, str]:
    """(the step cost's weights words, the memory plan's weights term) of ``validate path``'s replay."""
    text = _validate(path)
    words = re.search(r"(weights as the checkpoint stores them \([^)]*\)|weights FP8, quantized on load \([^)]*\))",
                      text)
    term = re.search(r"weights term is ([0-9.]+ GiB)", text)
    return (words.group(1) if words else ""), (term.group(1) if term else "")


def test_fp8_stated_only_in_the_resolved_config_on_an_unquantized_checkpoint_is_replayed_as_simulate_plans_it():
    # Llama-3.1-8B's checkpoint has no quantization_config: vLLM 0.19 writes model_config.quantization "fp8" only
    # for --quantization fp8, weights quantized as they load (ModelConfig._verify_quantization). The replay plans them
    # as simulate -q fp8 does (analyses.serving.online_quant): 8.49 GiB of weights, as vLLM logs for Llama-3.1-8B
    # under --quantization fp8 (tests/catalog/test_weights_loaded.py), not the BF16 checkpoint's
    said = (f"{RUNS / 'fp8_on_load' / 'meta.json'} records in its resolved config model_config.quantization fp8 on "
            "an unquantized checkpoint: the weights were quantized as they loaded, replayed as simulate --quantization "
            "fp8 plans and prices them")
    assert said in _validate(RUNS / "fp8_on_load")
    assert _weights(RUNS / "fp8_on_load") == (
        "weights FP8, quantized on load (vLLM --quantization fp8)", "8.49 GiB")
    # left to the checkpoint, not refused with the launch flags (the format is told once the model is read)
    assert recorded_settings(_extra("fp8_on_load")).refused == []


def _launched_fp8(tmp_path: Path, **meta: str) -> Path:
    """The run as recorded, its meta.json's launch given --quantization fp8 (and ``meta``'s keys edited)."""
    shutil.copytree(RUNS / "as_recorded", tmp_path / "run")
    path = tmp_path / "run" / "meta.json"
    d = json.loads(path.read_text())
    d["engine_kwargs"]["quantization"] = "fp8"
    if "model" in meta:
        d["model"] = d["engine_kwargs"]["model"] = meta["model"]
    if "gpu" in meta:
        d["hardware"]["device_name"] = meta["gpu"]
    path.write_text(json.dumps(d))
    return tmp_path / "run"


def test_a_launch_flag_fp8_takes_the_same_judgment_as_the_resolved_config(tmp_path):
    # --quantization fp8 in engine_kwargs: taken as simulate -q fp8, never refused; the checkpoint tells them apart
    rec = recorded_settings(_extra("as_recorded") | {"engine_kwargs": {"quantization": "fp8"}})
    assert (rec.refused, rec.unapplied, rec.flags["quantization"]) == ([], [], "fp8")
    # an unquantized checkpoint (Llama-3.1-8B, BF16): quantized on load, 8.49 GiB as vLLM logs it (above)
    assert _weights(_launched_fp8(tmp_path / "a")) == (
        "weights FP8, quantized on load (vLLM --quantization fp8)", "8.49 GiB")
    # a checkpoint already FP8 (Qwen3-32B-FP8; the run's GPU edited to an H100, where it fits): vLLM keeps its
    # weights as stored, and the replay plans the same 32.04 GiB as without the flag
    fp8 = _launched_fp8(tmp_path / "b", model="Qwen/Qwen3-32B-FP8", gpu="NVIDIA H100 80GB HBM3")
    assert _weights(fp8) == ("weights as the checkpoint stores them (fp8; vLLM --quantization fp8 keeps "
                                        "them)", "32.04 GiB")


def test_bitsandbytes_on_load_is_still_refused_saying_what_the_replay_takes():
    rec = recorded_settings(_extra("as_recorded") | {"engine_kwargs": {"quantization": "bitsandbytes"}})
    assert rec.refused == [f"{RUNS / 'as_recorded' / 'meta.json'} launches vLLM with --quantization bitsandbytes: "
                           "the weights are quantized to 4 bits as they load (bitsandbytes), which kvledger's replay "
                           "does not take from a record (it takes FP8 on load, as simulate --quantization fp8 plans "
                           "and prices it): replayed "
                           "without it, step times and the KV pool would be another engine's."]


def _run(quantization: str | None) -> SimpleNamespace:
    extra = _extra("fp8_on_load")
    extra["resolved_config"]["model_config"]["quantization"] = quantization
    return SimpleNamespace(measured=SimpleNamespace(metadata=SimpleNamespace(extra=extra)), source="run.jsonl")


def _plan(method: str, quantization: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(model=SimpleNamespace(quant=SimpleNamespace(method=method)),
                           settings=SimpleNamespace(quantization=quantization))


def test_the_checkpoints_own_format_tells_the_resolved_quantization_apart():
    # an FP8 checkpoint: vLLM writes its own format there (no flag needed), which the replay prices as stored
    assert resolved_quantization_notes(_run("fp8"), _plan("fp8")) == []
    # an AWQ checkpoint served by vLLM's awq_marlin override: still its own format
    assert resolved_quantization_notes(_run("awq_marlin"), _plan("awq")) == []
    with pytest.raises(InputError, match="model_config.quantization bitsandbytes on an unquantized checkpoint"):
        resolved_quantization_notes(_run("bitsandbytes"), _plan("none"))
    # fp8 on an unquantized checkpoint, the replay planned with it (replay_setup): said, not refused
    [note] = resolved_quantization_notes(_run("fp8"), _plan("none", "fp8"))
    assert note.endswith("on an unquantized checkpoint: the weights were quantized as they loaded, replayed as "
                         "simulate --quantization fp8 plans and prices them (a flag given on the command line wins)")
    # another method on an unquantized checkpoint: named, as a launch setting not modelled
    [note] = resolved_quantization_notes(_run("experts_int8"), _plan("none"))
    assert note.startswith("WARNING: recorded, not modelled: --quantization experts_int8 (resolved_config "
                           "model_config.quantization, ")
    # the checkpoint not read: said, not refused
    [note] = resolved_quantization_notes(_run("fp8"), None)
    assert note.startswith("WARNING: ") and "the checkpoint's own format was not read" in note
    # none stated, or the launch names it (then run_record's judgment of the flag applies): nothing here
    assert resolved_quantization_notes(_run(None), _plan("none")) == []
    run = _run("fp8")
    run.measured.metadata.extra["engine_kwargs"]["quantization"] = "fp8"
    assert resolved_quantization_notes(run, _plan("none")) == []
