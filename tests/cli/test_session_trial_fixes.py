"""What a new user's trial of session runs found, each pinned: sessions left out of the draw are counted and
explained, a saturated session run names --session-rate (not --rate), kvledger's own default max_model_len is named as
such when the engine refuses it, and a session run's refusal names the flags to drop."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.prediction_bands import knee_band_note, no_latency_band
from kvledger.cli.main import app
from kvledger.errors import DoesNotFitError, InputError, KvLedgerError

runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"
# 15 agent sessions at seed 0 under a 16,384-token cap: session 12 draws 37 turns whose first is 15,781 input + 128
# output tokens, so with the 4,096-token system prompt its first turn needs 20,005 > 16,384 tokens and the draw stops
# it before that turn (sessions.synthesize_sessions); the other 14 sessions send 128 turns
AGENT_15 = ["simulate", MODEL, "--gpu", "L4", "--workload", "agent", "--sessions", "15", "--session-rate", "20",
            "--max-model-len", "16384", "--json"]


def _refused(*args: str, kind: type[KvLedgerError] = KvLedgerError) -> str:
    """The message of the error the command ends with (the console entry prints it and exits with its status: 2, or 3
    for a DoesNotFitError), which must be a ``kind``."""
    with pytest.raises(kind) as err:
        runner.invoke(app, list(args), catch_exceptions=False)
    return str(err.value)


def test_a_session_left_out_of_the_draw_is_counted_and_explained_and_the_band_note_names_session_rate():
    res = runner.invoke(app, AGENT_15)
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["workload"]["sessions"]["num_sessions"] == 14 and d["workload"]["num_requests"] == 128
    left = [n for n in d["notes"] if n.startswith("sessions: 1 of the 15 drawn sessions left out, 14 run")]
    assert len(left) == 1 and "would pass the context cap of 16,384 tokens" in left[0]
    assert "4,096-token shared system prompt" in left[0] and "raise --max-model-len" in left[0]
    # 14 sessions starting at 20/s on one L4 queue: 57% of the turns' time is before their first token (≥ 10%)
    assert d["overload"]["kind"] == "session_queue"
    band = [n for n in d["notes"] if n.startswith("no TTFT or TPOT error band")]
    assert band == [no_latency_band(d["workload"]["mode"])]
    assert "lower --session-rate (or --sessions) below the capacity" in band[0] and "--rate below" not in band[0]


def test_the_band_notes_name_the_flag_that_sets_each_workload_kind_s_load():
    assert "lower --rate below the capacity" in no_latency_band("open loop (Poisson arrivals at 40 req/s)")
    assert "lower --session-rate (or --sessions) below" in no_latency_band("sessions: 8 closed loops, …")
    knee = {"first_s": 0.01, "peak_s": 0.05, "peak_quarter": 3, "ratio": 5.0, "rule": "r"}
    assert knee_band_note(knee, "closed loop").endswith("a lower --concurrency gives a TTFT with a band")
    assert knee_band_note(knee, "closed loop, paced").endswith("a lower --rate gives a TTFT with a band")
    assert knee_band_note(knee, "sessions: 3 closed loops").endswith(
        "a lower --session-rate (or --sessions) gives a TTFT with a band")


@pytest.mark.parametrize("cmd", [["simulate", MODEL, "--gpu", "L4", "--workload", "agent", "--sessions", "3"],
                                 ["offload", MODEL, "--gpu", "L4", "--workload", "agent", "--sessions", "3",
                                  "--kv-offloading-size", "64"]])
def test_the_session_default_max_model_len_is_named_as_kvledger_s_default(cmd):
    # Llama-3.1-8B on an L4 leaves 1,946 usable 16-token blocks (31,136 tokens): the session default 32,768 needs
    # 2,048 blocks, so vLLM would not start; the user set no max_model_len, and the message says whose it is. Nothing
    # can start: a DoesNotFitError, exit 3 as `plan` (it was an InputError, exit 2, before)
    msg = _refused(*cmd, kind=DoesNotFitError)
    assert msg.startswith("max_model_len 32,768 is kvledger's default for a session run (--workload chat|agent "
                          "without --max-model-len), not a value you set")
    assert "--max-model-len N sets it" in msg and "could never run" in msg and "--max-model-len 31136" in msg
    # a cap the user set: the engine's refusal as it was
    given = _refused(*cmd, "--max-model-len", "40000", kind=DoesNotFitError)
    assert given.startswith("the KV pool has 1,946 usable blocks") and "kvledger's default" not in given


@pytest.mark.parametrize("extra, words", [
    (["--concurrency", "8"], "so --concurrency would be ignored: drop --concurrency, or drop --workload"),
    (["--concurrency", "8", "--rate", "3"], "so --rate and --concurrency would be ignored: drop --rate and "
                                            "--concurrency, or drop --workload"),
])
def test_a_session_run_names_the_flags_to_drop(extra, words):
    msg = _refused("simulate", MODEL, "--gpu", "H100", "--workload", "agent", *extra)
    assert words in msg and "drop them" not in msg


def test_session_flags_without_a_workload_name_the_ones_given():
    with pytest.raises(InputError, match=r"add --workload chat \(or agent\), or drop --session-rate$"):
        runner.invoke(app, ["simulate", MODEL, "--gpu", "H100", "--session-rate", "3"], catch_exceptions=False)


def test_the_left_out_sessions_fix_names_the_cap_that_bound():
    # the cap is min(max_model_len, the preset's own context); the advice to raise --max-model-len only where
    # max_model_len is the smaller (a review: with the preset's cap binding it changes nothing)
    from kvledger.analyses.serving.session_notes import sessions_left_out

    assert sessions_left_out(2, 300, 4096, 16384).endswith("; raise --max-model-len to keep them")
    preset = sessions_left_out(2, 300, 4096, 32768, by_max_model_len=False)
    assert preset.endswith("the cap is the preset's own (the session shape's context), not max_model_len, so no flag "
                           "keeps them") and "context cap of 32,768 tokens" in preset


def test_offload_says_which_sessions_it_left_out():
    # 20 agent sessions under a 6,144-token max_model_len: 12 have a first turn (4,096-token system prompt + input +
    # output) past it, so 8 run; offload said nothing of the 12 (left alone by the first pass: offload.py was full)
    import json

    from typer.testing import CliRunner

    from kvledger.analyses.serving.session_notes import left_out_note
    from kvledger.cli.main import app
    from kvledger.dynamics.workload.sessions import SESSION_SHAPES

    res = CliRunner().invoke(app, ["offload", "meta-llama/Llama-3.1-8B", "--gpu", "L4", "--workload", "agent",
                                   "--sessions", "20", "--max-model-len", "6144", "--kv-offloading-size", "64",
                                   "--json"])
    w = json.loads(res.stdout)["workload"]
    assert w["num_sessions"] == 8 and w["left_out_note"].startswith("sessions: 12 of the 20 drawn sessions left out, "
                                                                    "8 run")
    assert w["left_out_note"].endswith("raise --max-model-len to keep them")
    agent = SESSION_SHAPES["agent"]
    assert left_out_note(20, 20, agent, agent) is None  # none left out: no note
    # the preset's own cap bound (max_model_len at or above it): raising max_model_len moves nothing
    assert left_out_note(20, 19, agent, agent).endswith("not max_model_len, so no flag keeps them")


def test_the_left_out_note_says_when_the_model_s_context_set_the_cap():
    # the chat preset's own cap is 32,768 tokens; a 2,048-token cap below it was set by max_model_len, and raising
    # --max-model-len keeps the sessions only when the model's context is above the cap (8,192 here); where the cap is
    # the model's context (2,048, as the session rule takes for facebook/opt-13b), vLLM refuses a longer max_model_len
    from dataclasses import replace

    from kvledger.analyses.serving.session_notes import left_out_note
    from kvledger.dynamics.workload.sessions import SESSION_SHAPES

    chat = SESSION_SHAPES["chat"]
    capped = replace(chat, max_context_tokens=2048)
    assert left_out_note(20, 12, capped, chat, 8192).endswith("; raise --max-model-len to keep them")
    assert left_out_note(20, 12, capped, chat).endswith("; raise --max-model-len to keep them")  # context unknown
    by_model = left_out_note(20, 12, capped, chat, 2048)
    assert by_model.startswith("sessions: 8 of the 20 drawn sessions left out, 12 run")
    assert by_model.endswith("; the cap is the model's own 2,048-token context (the engine refuses a longer "
                             "max_model_len): these sessions exceed it and cannot be served whole, so no flag keeps "
                             "them")
