"""A measured run's own record of its launch settings is used when the user gives none (LLMServingSim's meta.json)."""

from __future__ import annotations

import json

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.api import engine_for
from kvledger.calibration.replay import load_measured


def _run_dir(tmp_path):
    reqs = [{"request_id": f"r{i}", "input_toks": 100, "output_toks": 4, "queued_ts": 1.0 + i,
             "first_token_ts": 1.1 + i,
             "last_token_ts": 1.2 + i} for i in range(3)]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reqs))
    (tmp_path / "meta.json").write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B", "vllm_version": "0.19.0",
                                                    "engine_kwargs": {"max_model_len": 4096, "max_num_seqs": 8,
                                                                      "max_num_batched_tokens": 2048}}))
    return tmp_path / "requests.jsonl"


def test_the_runs_own_settings_fill_what_the_user_left_unset(tmp_path):
    # the meta.json says max_model_len 4096, max_num_seqs 8, max_num_batched_tokens 2048 and vLLM 0.19.0: replaying
    # under the tool's defaults (131,072 tokens, 1,024 seqs, vLLM 0.33) would be another engine than the one measured
    run = load_measured(str(_run_dir(tmp_path)))
    setup = engine_for(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100"), run)
    cfg = setup.config
    assert (cfg.max_model_len, cfg.max_num_seqs, cfg.max_num_batched_tokens) == (4096, 8, 2048)
    assert setup.plan.memory.engine_version == "0.19.0"
    assert any(n.startswith("from the run's own record") and "max_model_len 4096" in n for n in setup.notes)
    # a flag given on the command line wins over the record
    given = engine_for(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", max_num_seqs=16), run)
    assert given.config.max_num_seqs == 16 and given.config.max_model_len == 4096


def test_validate_reads_the_model_from_the_runs_record_as_calibrate_does(tmp_path):
    # the meta.json names meta-llama/Llama-3.1-8B: validate without --model replays that model, exactly as with it
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    path = str(_run_dir(tmp_path))
    runner = CliRunner()
    bare = runner.invoke(app, ["validate", path, "--gpu", "H100", "--json"])
    assert bare.exit_code == 0, bare.output
    given = runner.invoke(app, ["validate", path, "--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B", "--json"])
    b, g = json.loads(bare.output), json.loads(given.output)
    # the same replay; the bare one says where its model came from, first among its notes
    assert b["notes"][0].startswith("model meta-llama/Llama-3.1-8B from the run's record (") and \
        b["notes"][0].endswith("(no --model given)")
    assert {**b, "notes": b["notes"][1:]} == g
    assert json.loads(bare.output)["model"].startswith("meta-llama/Llama-3.1-8B")
    # a record naming no model: the refusal says to pass --model
    (tmp_path / "meta.json").write_text(json.dumps({"vllm_version": "0.19.0"}))
    res = runner.invoke(app, ["validate", path, "--gpu", "H100"])
    assert res.exit_code != 0 and "names no model; pass --model" in str(res.exception)


def test_the_notes_name_meta_json_as_the_record_and_the_source_of_the_pool(tmp_path):
    # the real RTX 4090 run's record states num_gpu_blocks 2588 and the three limits: the notes must say the pool and
    # the limits came from meta.json, not from --num-gpu-blocks-override or the engine's defaults, and name meta.json
    # (requests.jsonl holds the requests, not the settings)
    path = _run_dir(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    meta["kv_cache"] = {"num_gpu_blocks": 2588, "block_size": 16, "gpu_memory_utilization": 0.9}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    setup = engine_for(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100"), load_measured(str(path)))
    record = next(n for n in setup.notes if n.startswith("from the run's own record"))
    assert f"({tmp_path / 'meta.json'})" in record and "requests.jsonl" not in record
    pool = next(n for n in setup.notes if n.startswith("KV pool: "))
    assert "from num_gpu_blocks_override in the run's record (meta.json)" in pool
    assert "--num-gpu-blocks-override" not in pool and "engine defaults" not in pool
    assert pool.endswith("max_num_seqs 8 (all three from the run's record)")
    # a flag given on the command line is still said to be the flag
    flagged = engine_for(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", num_gpu_blocks_override=2000,
                                        max_num_seqs=16), load_measured(str(path)))
    pool = next(n for n in flagged.notes if n.startswith("KV pool: "))
    assert "from --num-gpu-blocks-override" in pool
    assert "max_model_len, max_num_batched_tokens: the run's record; the others a flag" in pool


def test_a_flag_that_overrides_the_record_is_said(tmp_path):
    # the record says vLLM 0.19.0 and max_num_seqs 8; --engine-version 0.11.0 and --max-num-seqs 16 replace them,
    # and a note says so (a fresh-user trial: the record note just dropped engine_version, and the profile then named
    # 0.11.0 as assumed); a flag equal to the record replaces nothing
    run = load_measured(str(_run_dir(tmp_path)))
    setup = engine_for(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", engine_version="0.11.0",
                                      max_num_seqs=16, max_model_len=4096), run)
    note = next(n for n in setup.notes if n.startswith("the command line overrides the run's own record"))
    assert note.endswith(": max_num_seqs 8 → 16, engine_version 0.19.0 → 0.11.0; the replay is of the flags, not of "
                         "what ran")
    assert setup.plan.memory.engine_version == "0.11.0"
    # flags equal to the record as the replay reads them ("4K" = 4,096 tokens; "0.19" = 0.19.0) override nothing; "2k"
    # is 2,000 tokens, not the record's 2,048, and is said as read
    same = engine_for(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", max_model_len="4K",
                                     engine_version="0.19"), run)
    assert not any("overrides the run's own record" in n for n in same.notes)
    two_k = engine_for(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", max_num_batched_tokens="2k"), run)
    assert any(n.endswith(": max_num_batched_tokens 2048 → 2000; the replay is of the flags, not of what ran")
               for n in two_k.notes)


def test_calibrating_several_runs_names_the_one_that_cannot_be_planned(tmp_path):
    # two runs for a GPU-scope fit, the second of a model that does not fit the GPU (Llama-3.1-70B in bf16, 131 GiB of
    # weights, on one 24 GiB RTX 4090): the error names that run's file, not only "the model does not fit"
    import pytest

    from kvledger.calibration.gpu_profile_file import calibrate_gpu_files
    from kvledger.errors import InputError

    for d in ("ok", "big"):
        (tmp_path / d).mkdir()
    ok, big = _run_dir(tmp_path / "ok"), _run_dir(tmp_path / "big")
    meta = json.loads((tmp_path / "big" / "meta.json").read_text())
    (tmp_path / "big" / "meta.json").write_text(json.dumps({**meta, "model": "meta-llama/Llama-3.1-70B"}))
    with pytest.raises(InputError, match=r"^replaying .*big/requests\.jsonl: the model does not fit"):
        calibrate_gpu_files([str(ok), str(big)], SimRequestArgs(model=None, gpu="RTX4090"))
