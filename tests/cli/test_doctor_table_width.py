"""``doctor -v`` into a pipe or file: the console is as wide as ``cli/main.py``'s PIPE_COLUMNS (10,000), and the
tables took their natural width (531 columns on the constructed preemption log, 378 on the real 0.19 start-up, from
the source and explanation cells). They are drawn at most ``TABLE_COLUMNS`` = 160 wide now, the long cells folded and
the short ones (a figure with its log line) whole; a terminal, or a $COLUMNS the user set, gives its own width, narrower
or wider (rich's console takes $COLUMNS, else the terminal's size)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import PIPE_COLUMNS, app

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"
START_019 = (Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "logs"
             / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")
_TABLE = tuple("┏┃┡│└")


def _verbose(columns: int, log: Path, *args: str) -> list[str]:
    res = CliRunner().invoke(app, ["doctor", str(log), *args, "-v"], env={"COLUMNS": str(columns)},
                             catch_exceptions=False)
    assert res.exit_code == 0
    return res.stdout.splitlines()


def test_doctor_tables_fit_160_columns_in_a_pipe():
    out = _verbose(PIPE_COLUMNS, LOGS / "constructed_v1_preemptions_at_full_kv.log", "--model",
                   "meta-llama/Llama-3.1-8B", "--gpu", "H100")
    rows = [x for x in out if x.startswith(_TABLE)]
    assert rows and max(len(x) for x in rows) <= 160
    # a log figure and its line stay on one row: vLLM 0.11.0 printed 26.31x at 16,000 tokens on line 8
    assert any("│ 26.31x (L8)" in x for x in rows)
    rows = [x for x in _verbose(PIPE_COLUMNS, START_019) if x.startswith(_TABLE)]
    assert max(len(x) for x in rows) <= 160 and any("│ 476,016 (L" in x for x in rows)


def test_a_narrow_terminal_keeps_its_width():
    out = _verbose(100, LOGS / "constructed_v1_preemptions_at_full_kv.log", "--model", "meta-llama/Llama-3.1-8B",
                   "--gpu", "H100")
    assert max(len(x) for x in out if x.startswith(_TABLE)) <= 100


def test_a_wider_terminal_gets_wider_tables():
    # COLUMNS=220: rich's console is 220 wide, so the tables (531 columns natural on this log) fold at 220, not 160
    out = _verbose(220, LOGS / "constructed_v1_preemptions_at_full_kv.log", "--model", "meta-llama/Llama-3.1-8B",
                   "--gpu", "H100")
    widest = max(len(x) for x in out if x.startswith(_TABLE))
    assert 160 < widest <= 220
