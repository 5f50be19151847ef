"""validate/calibrate read the engine's resolved ``model_config`` and ``speculative_config`` that LLMServingSim's
meta.json records (vLLM 0.19's ``VllmConfig``), and refuse speculative decoding or weights quantized on load stated
only there, as they refuse the same launch flags in ``engine_kwargs``.

The runs: tests/calibration/data/llmservingsim_rtx4090_edits/ (SOURCES.md) — LLMServingSim's RTX 4090 Llama-3.1-8B
run as recorded, and two copies each with one value of its meta.json edited by hand (synthetic edits, marked there)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvledger.calibration.resolved_quant import resolved_quantization_notes
from kvledger.calibration.run_record import recorded_settings
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


def test_fp8_stated_only_in_the_resolved_config_on_an_unquantized_checkpoint_is_refused(cli_entry):
    # Llama-3.1-8B's checkpoint has no quantization_config: vLLM 0.19 writes model_config.quantization "fp8" only
    # for --quantization fp8, weights quantized as they load (ModelConfig._verify_quantization)
    code, out, _ = cli_entry("validate", str(RUNS / "fp8_on_load"), "--json")
    msg = json.loads(out)["error"]["message"]
    assert code == 2 and (f"{RUNS / 'fp8_on_load' / 'meta.json'} records in its resolved config "
                          f"model_config.quantization fp8 on an unquantized checkpoint{ON_LOAD}") in msg
    # left to the checkpoint, not refused with the launch flags (the format is told once the model is read)
    assert recorded_settings(_extra("fp8_on_load")).refused == []


def _run(quantization: str | None) -> SimpleNamespace:
    extra = _extra("fp8_on_load")
    extra["resolved_config"]["model_config"]["quantization"] = quantization
    return SimpleNamespace(measured=SimpleNamespace(metadata=SimpleNamespace(extra=extra)), source="run.jsonl")


def _plan(method: str) -> SimpleNamespace:
    return SimpleNamespace(model=SimpleNamespace(quant=SimpleNamespace(method=method)))


def test_the_checkpoints_own_format_tells_the_resolved_quantization_apart():
    # an FP8 checkpoint: vLLM writes its own format there (no flag needed), which the replay prices as stored
    assert resolved_quantization_notes(_run("fp8"), _plan("fp8")) == []
    # an AWQ checkpoint served by vLLM's awq_marlin override: still its own format
    assert resolved_quantization_notes(_run("awq_marlin"), _plan("awq")) == []
    with pytest.raises(InputError, match="model_config.quantization bitsandbytes on an unquantized checkpoint"):
        resolved_quantization_notes(_run("bitsandbytes"), _plan("none"))
    # another method on an unquantized checkpoint: named, as a launch setting not modelled
    [note] = resolved_quantization_notes(_run("experts_int8"), _plan("none"))
    assert note.startswith("WARNING: recorded, not modelled: --quantization experts_int8 (resolved_config "
                           "model_config.quantization, ")
    # the checkpoint not read: said, not refused
    [note] = resolved_quantization_notes(_run("fp8"), None)
    assert note.startswith("WARNING: ") and "the checkpoint's own format was not read" in note
    # none stated, or the launch names it (then run_record's refusal of the flag applies): nothing here
    assert resolved_quantization_notes(_run(None), _plan("none")) == []
    run = _run("fp8")
    run.measured.metadata.extra["engine_kwargs"]["quantization"] = "fp8"
    assert resolved_quantization_notes(run, _plan("none")) == []
