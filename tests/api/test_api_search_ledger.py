"""``kvledger.search(ledger=…, resume=…)``: the command's --ledger and --resume in Python (the mirror test
``test_api_search_flags.py`` now holds them to the command's flags), their files checked by the command's own rules
(``cli/search_files.check_search_files``): not both, resume an existing file, and no file replaced, ever (the call has
no --force). Before, a long search from Python could not keep its record or continue one."""

from __future__ import annotations

import json
import re

import pytest

import kvledger
from kvledger import InputError, strict_json

# tests/api/test_api_search_flags.py's small search: 60 requests of 512 + 64 tokens at 5 req/s, H100 at TP 1 only
SMALL = dict(gpus=["H100"], tp=[1], kv_cache_dtype=["auto", "fp8"], num_requests=60, prompt_lengths="fixed:512",
             output_lengths="fixed:64", rate=5.0, cache=False, backend="serial")


def _plain(doc) -> dict:
    return json.loads(strict_json.dumps(doc.to_dict()))


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """(the fresh call's document, its ledger's lines)."""
    led = tmp_path_factory.mktemp("ledger") / "search.jsonl"
    doc = kvledger.search("meta-llama/Llama-3.1-8B", slo="ttft=2s,tpot=100ms", ledger=str(led), **SMALL)
    return _plain(doc), led.read_text().splitlines(keepends=True)


def test_the_ledger_holds_the_header_and_each_candidate(fresh):
    doc, lines = fresh
    # the two candidates (KV auto and fp8 on one H100 at TP 1): the header names both, one line each follows
    header = json.loads(lines[0])
    assert header["candidates"] == ["nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp1:kv-fp8"]
    assert sorted(json.loads(line)["id"] for line in lines[1:]) == header["candidates"]
    assert doc["winner"]["id"] in header["candidates"]


def test_resume_continues_a_cut_ledger_to_the_fresh_document(fresh, tmp_path):
    doc, lines = fresh
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:2]))  # as if the search had stopped after one candidate
    again = kvledger.search("meta-llama/Llama-3.1-8B", slo="ttft=2s,tpot=100ms", resume=cut, **SMALL)
    assert _plain(again) == doc
    assert cut.read_text() == "".join(lines)  # the ledger it rewrote is the fresh one (as search --resume's)


def test_the_files_are_checked_as_the_command_checks_them_and_none_is_replaced(fresh, tmp_path):
    kept = tmp_path / "kept.jsonl"
    kept.write_text("a file of the user's\n")
    call = dict(slo="ttft=2s,tpot=100ms", **SMALL)
    with pytest.raises(InputError, match=re.escape(
            f"kvledger.search: ledger {kept} already exists; refusing to overwrite it (the call never replaces a "
            "file: choose another name, or continue that ledger with resume)")):
        kvledger.search("meta-llama/Llama-3.1-8B", ledger=kept, **call)
    assert kept.read_text() == "a file of the user's\n"
    with pytest.raises(InputError, match="resume FILE continues that ledger; give it alone, without ledger"):
        kvledger.search("meta-llama/Llama-3.1-8B", ledger=tmp_path / "new.jsonl", resume=kept, **call)
    with pytest.raises(InputError, match=re.escape(f"resume {tmp_path / 'none.jsonl'}: no such file")):
        kvledger.search("meta-llama/Llama-3.1-8B", resume=tmp_path / "none.jsonl", **call)
    with pytest.raises(InputError, match=re.escape(f"resume {tmp_path}: is a folder")):
        kvledger.search("meta-llama/Llama-3.1-8B", resume=tmp_path, **call)
    assert not (tmp_path / "new.jsonl").exists()  # refused before any work: nothing written
