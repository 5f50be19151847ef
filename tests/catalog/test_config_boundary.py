"""The config and GPU-file boundary (issue 9): every bad input is a KvLedgerError naming file and field, never a
traceback.

Regression tests for each example in the issue, then Hypothesis properties that feed mutated real configs
(bundled, tests/fixtures, transformers' defaults) and GPU files to the loaders and to ``kvledger plan``.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import pytest
from console_run import console as _cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.models import bundled_models, load_model
from kvledger.catalog.modelspec import parse_config
from kvledger.errors import ConfigError, KvLedgerError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
ORACLE = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs"
_MODELS = resources.files("kvledger.catalog") / "data" / "models"


def _llama():
    return json.loads((_MODELS / "meta-llama--Meta-Llama-3.1-8B.json").read_text())



@pytest.mark.parametrize("key,value,message", [
    ("num_hidden_layers", [32], r"'num_hidden_layers': must be an integer in \[1, 4,096\], got \[32\]"),
    ("num_hidden_layers", "32", r"'num_hidden_layers': must be an integer in \[1, 4,096\], got '32'"),
    ("hidden_size", 10**400, r"'hidden_size': must be an integer in \[1, 1,048,576\], got an integer of 401 digits"),
    ("num_hidden_layers", 32_000_000, r"'num_hidden_layers': must be an integer in \[1, 4,096\], got 32000000"),
    ("vocab_size", -5, r"'vocab_size': must be an integer in \[1, 67,108,864\], got -5"),
    ("num_key_value_heads", 2.5, r"'num_key_value_heads': must be an integer"),
    ("rope_scaling", {"rope_type": "yarn", "factor": "big", "original_max_position_embeddings": 8192},
     r"'rope_scaling': factor must be a number in \(0, 1024\], got 'big'"),
])
def test_wrongly_typed_and_out_of_range_fields_are_named(key, value, message):
    raw = _llama()
    raw[key] = value
    with pytest.raises(ConfigError, match=message):
        parse_config(raw, source="cfg.json")


def test_thirty_two_million_layers_is_refused_at_once(tmp_path, monkeypatch, capsys):
    raw = _llama()
    raw["num_hidden_layers"] = 32_000_000
    f = tmp_path / "config.json"
    f.write_text(json.dumps(raw))
    code, out, err = _cli(monkeypatch, capsys, "plan", str(f), "--gpu", "H100")
    assert code == 2 and "num_hidden_layers" in err and "4,096" in err and "Traceback" not in err + out


def test_deeply_nested_json_and_huge_integer_literals(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"model_type": "llama", "x": ' + "[" * 50_000 + "]" * 50_000 + "}")
    with pytest.raises(ConfigError, match=r"deep.json: JSON nested 50,?001 levels deep|deep.json: JSON nested 50001 "
                                          r"levels deep"):
        load_model(str(deep))
    big = tmp_path / "big.json"
    big.write_text('{"model_type": "llama", "hidden_size": 1' + "0" * 5000 + "}")
    with pytest.raises(ConfigError, match=r"big.json: invalid JSON: Exceeds the limit"):
        load_model(str(big))


def test_names_longer_than_255_bytes(monkeypatch, capsys):
    code, out, err = _cli(monkeypatch, capsys, "plan", "org/" + "m" * 300, "--gpu", "H100")
    assert code == 2 and "longer than 255 bytes" in err and "Traceback" not in err + out
    code, out, err = _cli(monkeypatch, capsys, "plan", "./" + "d" * 300 + "/config.json", "--gpu", "H100")
    assert code == 2 and "longer than 255 bytes" in err
    code, out, err = _cli(monkeypatch, capsys, "plan", "meta-llama/Llama-3.1-8B", "--gpu", "./" + "g" * 300 + ".json")
    assert code == 2 and "longer than 255 bytes" in err and "Traceback" not in err + out


def test_bad_architectures_and_quantization_patterns():
    raw = _llama()
    raw["architectures"] = 7
    with pytest.raises(ConfigError, match=r"'architectures': must be a list of class names"):
        parse_config(raw, source="t")
    raw = _llama()
    raw["quantization_config"] = {"quant_method": "compressed-tensors", "ignore": ["re:("],
                                  "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float",
                                                                      "strategy": "channel"}}}}
    with pytest.raises(ConfigError, match=r"quantization_config.ignore': a module pattern is not a valid regular "
                                          r"expression"):
        parse_config(raw, source="t")


@pytest.mark.parametrize("body,field", [
    ({"memory": [80], "bandwidth_tb_s": 3.35, "bf16_tflops": 989}, "memory"),
    ({"memory": "80GiB", "bandwidth_tb_s": "fast", "bf16_tflops": 989}, "bandwidth_tb_s"),
    ({"memory": "80GiB", "bandwidth_tb_s": 3.35, "bf16_tflops": 1e400}, "bf16_tflops"),
    ({"memory": "80GiB", "bandwidth_tb_s": 3.35, "bf16_tflops": 989, "name": "n" * 256}, "name"),
    ({"memory": "80GiB", "bandwidth_tb_s": -1, "bf16_tflops": 989}, "bandwidth_tb_s"),
])
def test_gpu_file_fields_are_validated(tmp_path, body, field):
    f = tmp_path / "gpu.json"
    f.write_text(json.dumps(body).replace("Infinity", "1e400"))
    with pytest.raises(ConfigError, match=rf"gpu.json: field '{field}'"):
        resolve_gpu(str(f))


# ---- properties: mutated real inputs give a plan or a KvLedgerError, never another exception ----

def _seeds() -> list[dict]:
    seeds = [json.loads((_MODELS / b.file).read_text()) for b in bundled_models()]
    seeds += [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))]
    picks = ("llama", "gpt_bigcode", "falcon", "lfm2", "starcoder2", "gemma3", "mixtral", "deepseek_v3", "phi3",
             "qwen3_moe")
    seeds += [json.loads((ORACLE / f"{p}.json").read_text()) for p in picks if (ORACLE / f"{p}.json").exists()]
    return seeds


SEEDS = _seeds()
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30) | st.sampled_from([0, 1, 2**31,
        2**63, 10**400])
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12) | st.sampled_from(["auto", "bfloat16",
        "float8", "re:.*"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=8)


@st.composite
def mutated_configs(draw):
    raw = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    for _ in range(draw(st.integers(1, 4))):
        target = raw
        for sub in ("text_config", "quantization_config"):
            if isinstance(target.get(sub), dict) and draw(st.booleans()):
                target = target[sub]
        keys = sorted(target) or ["model_type"]
        key = draw(st.sampled_from(keys + ["sliding_window", "layer_types", "head_dim", "quantization_config",
                                           "num_experts"]))
        if draw(st.integers(0, 3)) == 0:
            target.pop(key, None)
        else:
            target[key] = draw(_json_values)
    return raw


def _check_spec(spec):
    for tp in (1, 2, 8):
        w = loaded_weights(spec, tp=tp).bytes
        assert math.isfinite(w) and w >= 0
    kv = sum(layer.kv_bytes_per_token(2) for layer in spec.layers if layer is not None)
    assert math.isfinite(kv) and kv >= 0 and spec.num_params >= 0


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_mutated_configs_parse_or_fail_cleanly(raw):
    try:
        spec = parse_config(raw, source="mutated.json")
    except KvLedgerError:
        return
    try:
        _check_spec(spec)
    except KvLedgerError:
        pass


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow,
                                                                                   HealthCheck.function_scoped_fixture])
@given(mutated_configs())
def test_plan_on_mutated_configs_exits_0_2_or_3_with_strict_json(tmp_path_factory, raw):
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    f = tmp_path_factory.mktemp("cfg") / "config.json"
    f.write_text(json.dumps(raw))
    r = CliRunner().invoke(app, ["plan", str(f), "--gpu", "H100", "--json"])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        assert isinstance(r.exception, KvLedgerError), repr(r.exception)
        return
    assert r.exit_code in (0, 3), r.output
    if r.exit_code == 0:
        json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))


_gpu_values = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=True,
    allow_infinity=True),
                        st.text(max_size=20), st.sampled_from(["80GiB", "79.22GiB", "1e400GB", "-3GB", "NaN"]),
                        st.lists(st.integers(), max_size=3))


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["name", "memory", "bandwidth_tb_s", "bf16_tflops", "fp8_tflops", "base", "x"]),
                       _gpu_values, max_size=7),
       st.sampled_from([".json", ".toml"]))
def test_mutated_gpu_files_load_or_fail_cleanly(tmp_path_factory, body, suffix):
    base = {"name": "lab", "memory": "80GiB", "bandwidth_tb_s": 3.35, "bf16_tflops": 989}
    base.update(body)
    f = tmp_path_factory.mktemp("gpu") / f"gpu{suffix}"
    if suffix == ".json":
        f.write_text(json.dumps(base))
    else:
        lines = []
        for k, v in base.items():
            if v is None:
                continue
            if isinstance(v, float) and not math.isfinite(v):
                text = "nan" if v != v else ("inf" if v > 0 else "-inf")
            else:
                text = json.dumps(v)
            lines.append(f"{k} = {text}")
        f.write_text("\n".join(lines).replace("true", "true").replace("false", "false"))
    try:
        g = resolve_gpu(str(f))
    except KvLedgerError:
        return
    assert g.memory_bytes > 0 and math.isfinite(g.hbm_bandwidth_bytes_per_s) and g.bf16_flops_per_s > 0
