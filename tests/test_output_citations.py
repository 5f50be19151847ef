"""Output never cites a document outside the package: no string the code can print names a file of the repository's
``docs/`` folder (a user with the installed wheel has no such folder), nor an issue or pull request of any tracker
(the project's or an engine's: a measured figure lives in a catalog row, which output cites, with its source in the
data file). Docstrings and comments may (they are read in the repository); an engine's own code or docs a number came
from may be named too."""

from __future__ import annotations

import ast
import csv
import functools
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kvledger"


def _docstring_ids(tree: ast.AST) -> set[int]:
    """ids of every string constant that stands alone as a statement (module, class, function and attribute
    docstrings): never printed."""
    return {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}


@functools.cache  # the two scans below read the same files: each parsed once
def _printed_strings(path: Path) -> tuple[tuple[int, str], ...]:
    tree = ast.parse(path.read_text())
    skip = _docstring_ids(tree)
    return tuple((n.lineno, n.value) for n in ast.walk(tree)
                 if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip)


def test_no_output_string_cites_the_repository_docs():
    # The repository's own documents, by the path a string would cite them with (docs/validation.md, …).
    ours = [f"docs/{p.relative_to(ROOT / 'docs').as_posix()}" for p in (ROOT / "docs").rglob("*.md")]
    assert "docs/validation.md" in ours  # the check looks where the citations were
    hits = [f"{path.relative_to(ROOT)}:{line}: {text[:100]!r}"
            for path in sorted(SRC.rglob("*.py")) for line, text in _printed_strings(path)
            if any(doc in text for doc in ours)]
    assert hits == []


def test_the_scan_finds_a_citation_in_a_printed_string(tmp_path):
    # The scan itself: a string passed to a call is printed, a docstring is not.
    f = tmp_path / "m.py"
    f.write_text('"""See docs/validation.md."""\nprint("band from docs/validation.md")\n')
    assert [t for _, t in _printed_strings(f)] == ["band from docs/validation.md"]


#: a citation of the project's own tracker ("issue 23", "issues 20")
_OWN_ISSUE = re.compile(r"\bissues? \d", re.IGNORECASE)
#: an issue or pull request of another tracker: "vllm issue #10634", "vllm PR #10511", "vllm #42058",
#: "intel/llm-scaler #666", ".../issues/666"
_TRACKER = re.compile(r"\b(?:issues?|PRs?|pull requests?)\s*#\s*\d"  # "issue #N", "PR #N"
                      r"|\b[\w.-]+(?:/[\w.-]+)?\s*#\d{2,}"  # "vllm #N", "vllm#N", "TianheWu/CoSeR#10"
                      r"|/(?:issues|pull)/\d", re.IGNORECASE)  # a tracker's address
#: measured-run sets kept beside the repository: output speaks of the user's own run, never quotes one of these
_DATASETS = ("kubecon", "inference-sim-training")


def _cites_elsewhere(text: str) -> bool:
    return bool(_OWN_ISSUE.search(text) or _TRACKER.search(text)) or any(d in text.lower() for d in _DATASETS)


def test_no_output_string_cites_an_issue_or_another_dataset():
    hits = [f"{path.relative_to(ROOT)}:{line}: {text[:100]!r}"
            for path in sorted(SRC.rglob("*.py")) for line, text in _printed_strings(path) if _cites_elsewhere(text)]
    assert hits == []


def test_the_issue_scan_catches_any_trackers_issue_and_keeps_run_numbers():
    assert _cites_elsewhere("the targets (issue 23: mean TTFT within 15%)")
    assert _cites_elsewhere("the field's 3.47 ms at kubecon's 1 req/s")
    # an engine's issue or pull request, as the FP8 KV notes cited them before their figures moved to a catalog row
    assert _cites_elsewhere("20 µs per sequence (vllm issue #10634)")
    assert _cites_elsewhere("'always slower' (vllm #48786 on Hopper, intel/llm-scaler #666).")
    assert _cites_elsewhere("3.58 at TP 2 on H100 (vllm PR #10511)")
    assert _cites_elsewhere("see https://github.com/sgl-project/sglang/issues/30815")
    assert _cites_elsewhere("measured: 39.38 GiB (vllm#16570), 39.50 (TianheWu/CoSeR#10)")
    # a run's number, a catalog row and a count are not citations
    assert not _cites_elsewhere("the best of 2 runs: #2 c.json")
    assert not _cites_elsewhere("fp8_kv_measurements.csv row vllm-a100-qwen3-8b-decode: decode speed +0.4 … +5.5 %")


#: what a printed source must not hold: an issue or PR number (``#123``, ``vllm#123``), a link, or a file of the
#: repository that the installed package lacks (``tests/…``, ``docs/…``)
_EXTERNAL = re.compile(r"#\d|github|https?:|\btests/|\bdocs/", re.IGNORECASE)


def test_no_catalog_source_column_cites_outside_the_package():
    # Every ``source`` column of the package's catalog CSVs is printed (the plan's device total, a price's
    # provenance), and so are their notes (``prices --json``); the external references live in the file's
    # ``references`` column, which no reader prints.
    files = sorted((SRC / "catalog" / "data").rglob("*.csv"))
    assert any(f.name == "gpu_cuda.csv" for f in files)  # the scan looks where the citations were
    hits = [f"{f.relative_to(SRC)}:{next(iter(row.values()))}:{col}: {text[:90]!r}"
            for f in files for row in csv.DictReader(f.open(encoding="utf-8")) for col, text in row.items()
            if col != "references" and _EXTERNAL.search(text or "")]
    assert hits == []


_PLAN_GPUS = ("H100", "A100-40GB", "RTX 4090", "MI300X", "T4")


@pytest.mark.parametrize("gpu", _PLAN_GPUS)
@pytest.mark.parametrize("extra", [("-v",), ("--json",), ("--kv-cache-dtype", "fp8", "-v")])
def test_plan_output_names_no_source_outside_the_package(gpu, extra):
    # The device total's source is the catalog row (gpu_cuda.csv, nvidia_h100_sxm: measured 79.19 GiB in 40 vLLM
    # 0.19.0 H100 start-ups; …), never the public log's issue number it was read from; the non-torch range and the
    # FP8 notes likewise. T4 refuses FP8 KV (SM75): its refusal is checked instead.
    from kvledger.cli.main import app
    from kvledger.errors import KvLedgerError

    try:
        res = CliRunner().invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", gpu, *extra],
                                 catch_exceptions=False, env={"COLUMNS": "250"})
        text = res.output
    except KvLedgerError as e:
        text = str(e)
    assert text.strip()
    cited = [line for line in text.splitlines() if _EXTERNAL.search(line) or _cites_elsewhere(line)]
    assert cited == []


def test_the_plan_cites_the_catalog_row_of_its_device_total():
    from kvledger.catalog.gpus import get_gpu

    # gpu_cuda.csv row nvidia_h100_sxm: 81,090 MiB = 79.19 GiB, as 40 vLLM 0.19.0 start-ups printed it
    assert get_gpu("H100").memory_source == ("catalog gpu_cuda.csv, nvidia_h100_sxm: measured 79.19 GiB in 40 vLLM "
                                             "0.19.0 H100 start-ups; 79.22 in a public vLLM start-up log")
