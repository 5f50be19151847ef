"""The Python API's notes name its parameters, not the command's flags (``api.results.python_words``,
``python_document``): a note from ``kvledger.search(...)`` says ``max_gpus_per_replica 32``, where ``kvledger search``
says ``--max-gpus-per-replica 32``; a command line the user would run keeps the command's flags."""

from __future__ import annotations

import inspect

import kvledger
from kvledger.api.results import python_document, python_words

SEARCH = frozenset(inspect.signature(kvledger.search).parameters)


def test_a_flag_of_the_call_is_named_as_its_parameter_and_a_command_line_is_kept():
    # the unit cap's note (analyses.search.unit_cap.cap_note) as the command prints it, read by the call's terms
    cli = ("--max-gpus-per-replica 16 (the default: 2 nodes of the catalog's largest instance, 8 GPUs): 1 candidate "
           "of more GPUs per replica pruned before planning, up to 32 GPUs (e.g. nvidia_h100_sxm:tp32:kv-auto); give "
           "--max-gpus-per-replica 32 to search them")
    assert python_words(cli, SEARCH) == cli.replace("--max-gpus-per-replica", "max_gpus_per_replica")
    # kept: a kvledger command line, a command name followed by its flags, vLLM's and SGLang's launch lines, the
    # engine's quoted words, and a flag that is no parameter of the call (--simulate)
    kept = ["pass engine_version for yours (kvledger plan --engine sglang shows it)",
            "the SLO capacity (goodput --simulate --target finds it)",
            "vllm serve meta-llama/Llama-3.1-8B --max-num-seqs 1024",
            "python -m sglang.launch_server --tp-size 1 --chunked-prefill-size 8192",
            'vLLM exits with "--max-model-len 9000 exceeds"', "as cost --simulate's"]
    assert [python_words(t, SEARCH) for t in kept] == kept
    assert python_words("more --num-requests; --api names another", SEARCH) == "more num_requests; api names another"


def test_a_document_is_rewritten_where_it_names_a_flag_and_left_as_it_was():
    doc = {"notes": ["--gpu-provider fixes one"], "winner": {"launch": {"vllm": "vllm serve m --max-num-seqs 8"}},
           "kv_tiers": {"note": "--kv-offloading-size 64"}, "rate": 3.0}
    out = python_document(doc, SEARCH)
    assert out == {"notes": ["gpu_provider fixes one"], "winner": {"launch": {"vllm": "vllm serve m --max-num-seqs 8"}},
                   "kv_tiers": {"note": "--kv-offloading-size 64"}, "rate": 3.0}  # kv_tiers: the typed record's own
    assert doc["notes"] == ["--gpu-provider fixes one"]  # a new document


def test_search_notes_name_max_gpus_per_replica():
    # --tp 1,32: the TP 32 unit holds 32 GPUs, past the default cap of 16 (2 × 8 GPUs): pruned, and the note says
    # which parameter searches it; the command's note names its flag
    d = kvledger.search("meta-llama/Llama-3.1-8B", slo="ttft=500ms,tpot=50ms", gpus=["H100"], tp=[1, 32], rate=30,
                        num_requests=200)
    note = next(n for n in d["notes"] if "pruned before planning" in n)
    assert note.startswith("max_gpus_per_replica 16 (the default: 2 nodes of the catalog's largest instance, 8 GPUs)")
    assert note.endswith("give max_gpus_per_replica 32 to search them") and "--" not in note
