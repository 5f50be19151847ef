"""What a new user's trial of the README's commands found (polish branch), each pinned."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import app

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"


def test_doctor_settings_table_says_unknown_values_without_python_none():
    # the V0 H100 log names no model and no max_model_len: the settings table printed "None" for them
    res = CliRunner().invoke(app, ["doctor", str(LOGS / "v0.8-v0engine_llama-2-7b_h100.log"), "--verbose"])
    # exit 1: the excerpt ends at the profiling lines, before the server shows it started
    assert res.exit_code == 1 and "None" not in res.output
    settings = res.output.split("Settings used for the ledger")[1].split("Start-up:")[0]
    assert any(line.startswith("│ model") and "│ —" in line for line in settings.splitlines())


def test_an_unreadable_size_flag_says_a_bare_number_is_gib():
    # `plan --kv-offloading-size abc` said "write e.g. '51.38GiB', '16GB' or a number of bytes", but a bare number on
    # a size flag is GiB (units.parse_memory_flag), so "a number of bytes" sent the user wrong
    import pytest

    from kvledger.errors import InputError
    from kvledger.units import parse_memory_flag

    for text in ("abc", "1.2.3GiB"):
        with pytest.raises(InputError) as err:
            parse_memory_flag(text, what="--kv-offloading-size")
        assert "a bare number of GiB" in str(err.value) and "number of bytes" not in str(err.value)
    res = CliRunner().invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-memory", "lots"])
    assert isinstance(res.exception, InputError) and "a bare number of GiB" in str(res.exception)


def test_an_unknown_format_names_the_commands_that_take_format(tmp_path):
    # validate and calibrate have no --format flag; the message told their users to "force one with --format NAME"
    p = tmp_path / "notes.txt"
    p.write_text("vm\n")
    res = CliRunner().invoke(app, ["validate", str(p), "--gpu", "H100"])
    msg = " ".join(str(res.exception).split())
    assert "(goodput and cost force one with --format NAME)" in msg
    assert "--format" not in CliRunner().invoke(app, ["validate", "--help"]).output


def test_plan_verbose_gives_the_prefill_chunks_intensity_its_unit():
    # 131.9 TFLOP ÷ 16.08 GB = 8,204 FLOP per byte; the roofline table printed "intensity 8,204" with no unit
    res = CliRunner().invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--verbose"])
    text = " ".join(res.output.split())
    assert "intensity 8,204 FLOP/B" in text
