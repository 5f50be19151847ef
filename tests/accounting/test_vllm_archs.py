"""Architectures no engine here plans (encoder-only, encoder-decoder, removed from vLLM's registry) and the warning for
a causal LM vLLM's registry does not list (vllm_archs.py; registries of vLLM 0.19 and 0.33, models/registry.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import ConfigError, EngineRefusalError, InputError

ARCHS = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "archs"


def _plan(name, *extra):
    return CliRunner().invoke(app, ["plan", str(ARCHS / f"{name}.json"), "--gpu", "H100", *extra],
                              catch_exceptions=False, env={"COLUMNS": "250"})


@pytest.mark.parametrize("name,extra,words", [
    # T5: encoder-decoder, in neither registry; refused under SGLang too
    ("t5", (), "vLLM's v1 engine serves no encoder-decoder model but Whisper"),
    ("t5", ("--engine", "sglang"), "sglang is planned here for decoder-only models"),
    # BERT MLM: encoder-only; 0.33's registry lists BertForMaskedLM as a pooling model, 0.19's does not
    ("bert", (), "vllm 0.33.0 serves it for pooling"),
    ("bert", ("--engine-version", "0.19.0"), "vLLM serves such models for pooling only"),
    # Mllama: 0.33's previously-supported table says removed in 0.10.2 (0.19's says the same: the removal predates it)
    ("mllama", (), "vLLM removed it in 0.10.2 with V0's encoder-decoder support"),
    ("mllama", ("--engine-version", "0.19.0"), "vLLM removed it in 0.10.2"),
    # Whisper: served, but its cross-attention K/V is not modelled (refused as its config is read: a ConfigError)
    ("whisper", (), "cross-attention KV not modelled"),
])
def test_architectures_without_a_decoder_kv_plan_are_refused_naming_why(name, extra, words):
    with pytest.raises((InputError, ConfigError)) as err:  # the console entry prints it and exits 2
        _plan(name, *extra)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_console_entry_exits_2_for_t5():
    p = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "plan", str(ARCHS / "t5.json"), "--gpu", "H100"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("error: T5ForConditionalGeneration is an encoder-decoder model")


def test_an_unlisted_causal_lm_plans_as_a_standard_decoder_with_a_warning_first():
    # FooForCausalLM: in neither registry; vLLM would try its Transformers backend. KV as today: 2 × 32 layers × 8 KV
    # heads × 128 × 2 B = 131,072 B/token; the warning is the line under the title.
    r = _plan("foo")
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert lines[1].startswith("WARNING: FooForCausalLM is not in vLLM 0.33.0's model registry")
    assert r.output.index("WARNING: FooForCausalLM") < r.output.index("KV per token: 131,072 B")
    d = json.loads(_plan("foo", "--json").stdout)
    assert d["model"]["notes"][0].startswith("WARNING: FooForCausalLM is not in vLLM 0.33.0's model registry")


def test_a_listed_architecture_gets_no_warning():
    # meta-llama/Llama-2-7b-hf (bundled): LlamaForCausalLM is in both registries
    r = CliRunner().invoke(app, ["plan", "meta-llama/Llama-2-7b-hf", "--gpu", "H100"], catch_exceptions=False)
    assert r.exit_code == 0 and "WARNING" not in r.output


def test_the_release_an_architecture_arrived_in_is_read_from_the_registries():
    # added_in (tools/vllm_arch_releases.py over the registry tables of every vLLM release 0.5.0–0.33.0): the first
    # release listing GptOssForCausalLM is 0.10.1, Qwen3NextForCausalLM 0.10.2, Qwen3ForCausalLM 0.8.4,
    # Llama4ForConditionalGeneration 0.8.3, Gemma3ForConditionalGeneration 0.8.0, DeepseekV3ForCausalLM 0.6.6
    from kvledger.accounting.vllm_archs import _registry

    got = {a: _registry()[a]["added_in"] for a in ("GptOssForCausalLM", "Qwen3NextForCausalLM", "Qwen3ForCausalLM",
                                                   "Llama4ForConditionalGeneration", "Gemma3ForConditionalGeneration",
                                                   "DeepseekV3ForCausalLM", "LlamaForCausalLM")}
    assert got == {"GptOssForCausalLM": "0.10.1", "Qwen3NextForCausalLM": "0.10.2", "Qwen3ForCausalLM": "0.8.4",
                   "Llama4ForConditionalGeneration": "0.8.3", "Gemma3ForConditionalGeneration": "0.8.0",
                   "DeepseekV3ForCausalLM": "0.6.6", "LlamaForCausalLM": "0.5.0"}


def test_a_model_planned_on_a_release_before_its_architecture_warns_or_is_refused():
    # Qwen3-32B under vLLM 0.8.0: 0.8.0's registry has no Qwen3ForCausalLM (first in 0.8.4). From 0.7.2 vLLM falls
    # back to its Transformers backend: a warning, naming the release that lists it; before 0.7.2 it refuses the model
    # ("Model architectures [...] are not supported"; config.py checks the architecture before the quantization).
    # gpt-oss-20b under 0.8.5 (once planned with that warning) is refused for its MXFP4 checkpoint first: no
    # mxfp4.py before 0.10.1, "Unknown quantization method: mxfp4" (exit 3)
    def run(app, args, **kw):
        return CliRunner().invoke(app, args, env={"COLUMNS": "250"}, **kw)

    r = run(app, ["plan", "Qwen/Qwen3-32B", "--gpu", "H100", "--engine-version", "0.8.0", "--max-model-len", "8192"])
    assert r.exit_code == 0 and r.output.splitlines()[1].startswith(
        "WARNING: Qwen3ForCausalLM is not in vLLM 0.8.0's model registry (vLLM lists it from 0.8.4")
    assert "WARNING" not in run(app, ["plan", "openai/gpt-oss-20b", "--gpu", "A100-40GB", "--engine-version",
                                      "0.10.1"]).output
    with pytest.raises(EngineRefusalError, match="MXFP4 arrived in vLLM 0.10.1"):
        run(app, ["plan", "openai/gpt-oss-20b", "--gpu", "A100-40GB", "--engine-version", "0.8.5"],
            catch_exceptions=False)
    with pytest.raises(EngineRefusalError) as err:  # a real checkpoint the release does not load: exit 3
        run(app, ["plan", "openai/gpt-oss-20b", "--gpu", "A100-40GB", "--engine-version", "0.6.6"],
            catch_exceptions=False)
    assert "vLLM has no Transformers fallback before 0.7.2" in str(err.value)
    q = run(app, ["plan", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--gpu", "H100", "--tp", "4", "--engine-version",
                  "0.10.1"])
    assert ("WARNING: Qwen3NextForCausalLM is not in vLLM 0.10.1's model registry (vLLM lists it from 0.10.2"
            in " ".join(q.output.split()))


@pytest.mark.parametrize("model,old,new", [("ai21labs/Jamba-v0.1", "0.10.0", "0.10.1"),
                                           ("nvidia/Nemotron-H-56B-Base-8K", "0.9.2", "0.10.0")])
def test_a_mamba_hybrid_on_a_release_that_serves_it_on_v0_is_flagged(model, old, new):
    # vLLM 0.9.2's EngineArgs._is_v1_supported_oracle sends a model with inner state to V0 ("V1 mamba models are
    # unoptimized"), 0.10.0's does not; models/jamba.py marks JambaForCausalLM SupportsV0Only in 0.10.0, not in 0.10.1.
    # The plan's hybrid layout is V1's, so the V0 releases get a warning under the title.
    def first_note(version):
        return CliRunner().invoke(app, ["plan", model, "--gpu", "H100", "--tp", "4", "--engine-version", version],
                                  env={"COLUMNS": "250"}).output.splitlines()[1]

    assert first_note(old).startswith(f"WARNING: vLLM {old} serves this Mamba hybrid on its V0 engine (V1 takes it "
                                      f"from {new})")
    assert not first_note(new).startswith("WARNING")


def test_the_sources_count_of_registries_read_matches_the_release_table():
    # vllm_releases.LAST_PATCH lists 0.5.0–0.5.5 (6), 0.6.0–0.6.6 (7), 0.7.0–0.7.3 (4), 0.8.0–0.8.5 (6), 0.9–0.11
    # (3 each), 0.12, 0.13 (1 each), 0.14, 0.15 (2 each), 0.16 (1), 0.17–0.19 (2 each), 0.20 (3), 0.21 (1), 0.22 (2),
    # 0.23, 0.24 (1 each), 0.25 (2), 0.26 (1), 0.27 (2), 0.28–0.33 (1 each): 64 releases from 0.5.0 to 0.33.0; the
    # registries read (one file per release) were 57 of them, so SOURCES.md names the 7 it did not read
    import re

    from kvledger.accounting.vllm_releases import LAST_PATCH

    listed = [(0, m, p) for (_, m), last in LAST_PATCH.items() if 5 <= m <= 33 for p in range(last + 1)]
    text = " ".join((Path(__file__).parents[2] / "src/kvledger/accounting/data/SOURCES.md").read_text().split())
    m = re.search(r"(\d+) of the (\d+) releases that `vllm_releases.py`'s `LAST_PATCH` lists in that range .*?not "
                  r"read: ([\d., ]+?), so", text)
    assert m is not None
    missing = [tuple(map(int, v.split("."))) for v in m.group(3).split(", ")]
    assert int(m.group(2)) == len(listed) == 64
    assert set(missing) <= set(listed) and int(m.group(1)) == len(listed) - len(missing) == 57
