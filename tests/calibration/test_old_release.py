"""A run recorded on a vLLM release older than the rules read (DistServe's 0.2.3 runs): replayed as what it ran."""

from __future__ import annotations

import json
from types import SimpleNamespace

from typer.testing import CliRunner

from kvledger.calibration.old_release import older_release
from kvledger.cli.main import app

runner = CliRunner()
#: docs/reference.md's flags for DistServe's launch, with --enforce-eager (0.2.3 had no CUDA graphs)
DS = ["--model", "facebook/opt-13b", "--gpu", "A100-80GB", "--engine-version", "0.5.0", "--gpu-memory-utilization",
      "0.95", "--max-num-batched-tokens", "16384", "--max-num-seqs", "1024", "--max-model-len", "2048", "--batching",
      "vllm_v0", "--max-paddings", "256", "--no-enable-chunked-prefill", "--no-enable-prefix-caching",
      "--enforce-eager"]


def _args(**kw):
    return SimpleNamespace(**{"batching": None, "enforce_eager": None, **kw})


def test_a_release_before_the_rules_read_is_replayed_under_the_oldest_with_what_it_was():
    # 0.2.3: before 0.5 (the oldest rules read) and before 0.2.4 (CUDA graphs, vllm PR #1926): every step eager
    settings, note = older_release("0.2.3", _args())
    assert settings == {"engine_version": "0.5.0", "enforce_eager": True}
    assert note.startswith("WARNING: the run's record names vLLM 0.2.3, older than the rules kvledger read (from "
                           "0.5.0)") and "CUDA graphs came in 0.2.4" in note
    # 0.3.0 had CUDA graphs: no eager; a flag the user gave wins; 0.5.0 and later, or no version, are not old
    assert older_release("v0.3.0", _args())[0] == {"engine_version": "0.5.0"}
    assert older_release("0.2.3", _args(enforce_eager=False))[0] == {"engine_version": "0.5.0"}
    assert older_release("0.5.0", _args()) is None and older_release("main", _args()) is None


def _errors(argv: list[str]) -> tuple[dict, list[str]]:
    res = runner.invoke(app, ["validate", *argv, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    return {k: v for k, v in d.items() if k.endswith("_rel_error")}, d["notes"]


def test_a_bundled_distserve_run_is_replayed_as_its_launch_with_no_flag_given():
    # the reader records DistServe's launch (vLLM 0.2.3, OPT-13B, A100-SXM-80GB, 0.95, 16,384 tokens, 1,024 sequences,
    # max_paddings 256): with no flag the replay is the one the documented flags give, figure for figure
    bare, notes = _errors(["distserve:vllm-100-1"])
    flagged, _ = _errors(["distserve:vllm-100-1", *DS])
    assert bare == flagged and bare["tpot_mean_rel_error"] is not None
    assert any(n.startswith("WARNING: the run's record names vLLM 0.2.3") for n in notes)
    assert any("max_paddings 256 (--max-paddings wins)" in n for n in notes)
    # the Ray flags change host time the replay does not model: named, not dropped
    assert any(n.startswith("WARNING: recorded, not modelled: --engine-use-ray, --worker-use-ray") for n in notes)


def test_the_old_release_note_says_what_the_flags_given_made_of_the_replay():
    # --no-enforce-eager on a 0.2.3 run: CUDA graphs as given, so the note does not claim every step eager; --batching
    # continuous: V1's scheduler, so the note does not claim the V0 engine's prefill-first steps (before: both claimed)
    _, note = older_release("0.2.3", _args(enforce_eager=False))
    assert "replayed as the V0 engine it ran (prefill-first steps, recompute preemption) under 0.5.0's" in note
    assert "eager" not in note
    _, note = older_release("0.2.3", _args(batching="continuous"))
    assert ("replayed by --batching continuous's scheduler, as given, not the V0 engine it ran (every step eager: CUDA "
            "graphs came in 0.2.4) under 0.5.0's memory plan") in note and "prefill-first" not in note
