"""A sequence argument of the Python API is checked item by item, and the error names the item that is wrong and the
types it may be (a fresh-user trial got "expected a sequence or None, got list [8192.5]"); an empty ``contexts`` is
refused as ``plan --context ''`` is, not silently replaced by the default contexts."""

from __future__ import annotations

import pytest

import kvledger

L8 = "meta-llama/Llama-3.1-8B"


@pytest.mark.parametrize(("contexts", "words"), [
    ([8192.5], "; item [0] is float 8192.5, not int or str"),
    ([8192, True], "; item [1] is bool True, not int or str"),  # a bool is not a token count
    ((4096, None), "; item [1] is NoneType None, not int or str"),
])
def test_the_wrong_item_of_contexts_is_named(contexts, words):
    # the items' types in brackets: "a sequence of int or str or None" read as if None were an item's type, then the
    # item [1] None of (4096, None) was called wrong
    with pytest.raises(kvledger.InputError) as err:
        kvledger.plan(L8, "H100", contexts=contexts)
    assert str(err.value) == f"kvledger.plan(contexts=...): expected a sequence of (int or str) or None{words}"


def test_a_wrong_path_item_is_named():
    with pytest.raises(kvledger.InputError, match=r"^kvledger\.cost\(path=\.\.\.\): .*; item \[1\] is int 3, not str"):
        kvledger.cost(["run.json", 3], slo="ttft=1s")


def test_a_text_for_contexts_is_still_refused_whole():
    with pytest.raises(kvledger.InputError) as err:
        kvledger.plan(L8, "H100", contexts="8K")
    assert str(err.value) == ("kvledger.plan(contexts=...): expected a sequence of (int or str) or None, got "
                              "str '8K'")


def test_empty_contexts_are_refused():
    with pytest.raises(kvledger.InputError, match=r"^kvledger\.plan: contexts is empty"):
        kvledger.plan(L8, "H100", contexts=[])
    # the default contexts when left None: 2K, 8K, 32K and max_model_len 131,072 (plan's defaults)
    assert [r["context_tokens"] for r in kvledger.plan(L8, "H100").to_dict()["concurrency"]] == [2048, 8192, 32768,
                                                                                                  131072]
