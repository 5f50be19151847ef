"""The command named in messages (kvledger.errors.COMMAND, a context variable): set for a command's body only, so
that commands run one after another or side by side in one process (tests, the web app) never name each other."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from cli_run import refused

from kvledger.errors import COMMAND, FormatError, command_named, running
from kvledger.evidence.sidecars import sidecar_hint

IP = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
PROM = IP / "stage_0_prometheus_metrics.json"
# evidence/sidecars.py: a Prometheus report gets "give <command> <its lifecycle twin> (…)"
HINT = f"give kvledger {{}} {IP / 'stage_0_lifecycle_metrics.json'} (the client's lifecycle report of the same stage)"


def _message() -> str:
    """What the reader says of the Prometheus report, as validate and calibrate print it."""
    return sidecar_hint(PROM)


def test_a_command_run_in_process_leaves_no_name_behind():
    said = refused("calibrate", str(PROM), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100")
    assert said.endswith(HINT.format("calibrate"))
    # after it, in the same thread and context, nothing is being run: the reader names the default, validate (before
    # the name was scoped, calibrate's stayed set here)
    assert COMMAND.get() is None and running() == "kvledger validate"
    assert _message().endswith(HINT.format("validate"))


def test_the_name_is_restored_when_the_block_ends_by_an_error():
    with command_named("goodput"):
        with pytest.raises(FormatError), command_named("calibrate"):
            assert _message().endswith(HINT.format("calibrate"))
            raise FormatError(str(PROM), "stop here")
        assert running() == "kvledger goodput"  # the outer command's name is back
    assert COMMAND.get() is None and running() == "kvledger validate"


def test_two_commands_side_by_side_each_see_their_own():
    # both threads set their name, then wait until the other has set its own, then read: with one process-global
    # value one of the two would read the other's name
    both_set = threading.Barrier(2, timeout=10)
    seen: dict[str, str] = {}

    def command(name: str) -> None:
        with command_named(name):
            both_set.wait()
            seen[name] = _message()
            both_set.wait()

    threads = [threading.Thread(target=command, args=(n,)) for n in ("validate", "calibrate")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["validate"].endswith(HINT.format("validate"))
    assert seen["calibrate"].endswith(HINT.format("calibrate"))
    assert COMMAND.get() is None  # neither thread's name reached this one
