"""A long-context trial's launch commands: a local config that is a bundled checkpoint with its context-length keys
changed (the YaRN set-up plan's own error recommends) is served as that Hub id with vLLM's --hf-overrides, never as
the file's weightless folder."""

from __future__ import annotations

import json
import shlex
from importlib.resources import files

from cli_run import run_cli as _run

from kvledger.catalog.config_overrides import bundled_base_of_config

_YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def _bundled(hf_id: str) -> dict:
    return json.loads((files("kvledger.catalog") / "data" / "models" / f"{hf_id.replace('/', '--')}.json").read_text())


def test_a_yarn_config_of_qwen72b_instruct_is_that_checkpoint_with_two_overrides():
    # Qwen2.5-72B-Instruct's bundled config has max_position_embeddings 32768 and no rope_scaling; the long-context
    # set-up adds rope_scaling (YaRN ×4 of 32,768) and, as vLLM ≥ the YaRN-scaled rule reads it, 131,072 positions.
    # The base Qwen2.5-72B differs from it in eos_token_id (151643 vs 151645) and rms_norm_eps (1e-5 vs 1e-6), keys
    # that are not overrides, so only the Instruct matches: exactly the two keys the file changed.
    raw = _bundled("Qwen/Qwen2.5-72B-Instruct") | {"rope_scaling": _YARN, "max_position_embeddings": 131072}
    base = bundled_base_of_config(raw)
    assert base is not None and base.hf_id == "Qwen/Qwen2.5-72B-Instruct"
    assert base.overrides == {"max_position_embeddings": 131072, "rope_scaling": _YARN}
    # a key dropped from the bundled config is overridden to null: Llama-3.1-70B's llama3 rope_scaling removed
    raw = {k: v for k, v in _bundled("meta-llama/Meta-Llama-3.1-70B").items() if k != "rope_scaling"}
    assert bundled_base_of_config(raw).overrides == {"rope_scaling": None}
    # a weight-shaping key changed (80 → 40 layers) is another checkpoint: no Hub id to tell
    assert bundled_base_of_config(_bundled("Qwen/Qwen2.5-72B-Instruct") | {"num_hidden_layers": 40}) is None


def test_search_serves_the_hub_id_with_hf_overrides_for_a_yarn_config(tmp_path):
    cfg = tmp_path / "q72yarn.json"
    cfg.write_text(json.dumps(_bundled("Qwen/Qwen2.5-72B-Instruct")
                              | {"rope_scaling": _YARN, "max_position_embeddings": 131072}))
    res = _run("search", str(cfg), "--slo", "ttft=30s,tpot=200ms", "--gpus", "H100", "--tp", "4", "--max-model-len",
               "131072", "--show-command", "H100:tp4:kv-auto", "--json")
    launch = json.loads(res.stdout)["launch"]
    vllm = shlex.split(launch["vllm"])
    assert vllm[:3] == ["vllm", "serve", "Qwen/Qwen2.5-72B-Instruct"] and str(tmp_path) not in launch["vllm"]
    # the flag's value is one JSON object (vLLM's union_dict_and_str: json.loads) holding exactly the changed keys
    assert vllm[3] == "--hf-overrides" and json.loads(vllm[4]) == {"max_position_embeddings": 131072,
                                                                   "rope_scaling": _YARN}
    sglang = shlex.split(launch["sglang"])
    i = sglang.index("--json-model-override-args")
    assert sglang[i - 1] == "Qwen/Qwen2.5-72B-Instruct" and json.loads(sglang[i + 1]) == json.loads(vllm[4])
    assert launch["check"].startswith(f"kvledger plan {cfg} ")  # the check line plans the file itself
    assert ("it is the bundled config of Qwen/Qwen2.5-72B-Instruct with max_position_embeddings, rope_scaling "
            "changed") in launch["note"]
