"""``kvledger search``'s defects found by a fresh-user trial: two outputs on one file, the error line under
``| head -1``, duplicate KV dtype spellings, the API verdict's lead, a --plot not written, the CSV's order and
columns, and the smaller input checks."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
S8 = ["search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=300ms,tpot=40ms", "--num-requests", "200", "--rate", "5",
      "--gpus", "H100", "--tp", "1", "--max-model-len", "16K"]


@pytest.mark.parametrize("first, second, name", [
    ("--ledger", "--csv", "x.csv"), ("--csv", "--plot", "y.png"), ("--resume", "--csv", "r.jsonl")])
def test_two_outputs_on_one_file_are_refused_before_any_work(tmp_path, monkeypatch, first, second, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.jsonl").write_text("")  # --resume must name an existing file
    # ./NAME and NAME resolve to one file: the second flag's spelling differs, the file does not
    res = runner.invoke(app, [*S8, first, name, second, f"./{name}"])
    assert isinstance(res.exception, InputError), res.output
    assert str(res.exception) == (f"{first} and {second} both name {name}: each writes its own file, so one would "
                                  "replace the other; give them different file names.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]  # nothing written
