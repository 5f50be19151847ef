"""TensorRT-LLM's release text read whole (accounting/trtllm_version.py), by every rule that depends on it: the
releases the public start-ups print read as those releases, and text that only begins like one refused instead of
read by its prefix."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kvledger.accounting.max_model_len import engine_config_len, trtllm_runtime_of
from kvledger.accounting.trtllm_version import trtllm_release
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

STARTUPS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "trtllm_public_startups.csv"
SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"  # config max_position_embeddings 10,485,760


def test_the_public_startups_releases_read_as_printed():
    # the releases of benchmarks/data/trtllm_public_startups.csv (TR03's "TensorRT-LLM version: 0.19.0"; TR04's engine
    # "0.13.0.dev2024082000", a nightly; TR08's 0.13.0.dev2024081300), each read whole
    rows = {r["id"]: r["trtllm_version"] for r in csv.DictReader(STARTUPS.open(encoding="utf-8"))}
    read = {k: trtllm_release(v) for k, v in rows.items() if v}
    assert read == {"TR01": (1, 2, 1), "TR02": (1, 2, 1), "TR03": (0, 19, 0), "TR04": (0, 13, 0), "TR06": (0, 20, 0),
                    "TR08": (0, 13, 0)}
    # the runtime by release: the TensorRT-engine executor before 1.0 (TR03, TR04), the PyTorch backend from 1.0
    assert [trtllm_runtime_of(rows[k]) for k in ("TR01", "TR03", "TR04")] == ["pytorch", "tensorrt", "tensorrt"]
    assert trtllm_runtime_of("1.0.0rc4") == "pytorch"


def test_llama4_length_by_release_on_the_pytorch_backend():
    # Llama4ForConditionalGeneration.infer_max_seq_len: 8,192 before 0.21 (no chunked attention), the config's
    # 10,485,760 from 0.21
    scout = load_model(SCOUT)
    assert engine_config_len(scout, "trtllm", "0.20.0", "pytorch")[0] == 8192
    assert engine_config_len(scout, "trtllm", "0.21.0", "pytorch")[0] == 10_485_760


@pytest.mark.parametrize("text", ["25.05-trtllm", "0.20.0,1.2.1"])
def test_text_that_only_begins_like_a_release_is_refused_not_read_by_its_prefix(text):
    # TR03's log names its Triton image "tritonserver 25.05-trtllm" beside the release (0.19.0). The prefix regex
    # ^v?(\d+)\.(\d+) read that tag as TensorRT-LLM 25.5: the PyTorch backend's Llama-4 length with chunked attention
    # (10,485,760 tokens, "from 0.21"), where 0.19.0 gives 8,192; and "0.20.0,1.2.1" as 0.20 (the TensorRT-engine
    # executor). Now the whole text must be one release, as plan's --engine-version check already asked.
    scout = load_model(SCOUT)
    with pytest.raises(InputError, match="is not one TensorRT-LLM version like 0.13.0 or 1.2.1"):
        engine_config_len(scout, "trtllm", text, "pytorch")
    with pytest.raises(InputError, match="is not one TensorRT-LLM version like 0.13.0 or 1.2.1"):
        trtllm_runtime_of(text)


@pytest.mark.parametrize("text, inside", [
    # NVIDIA's Triton release compatibility matrix (container trtllm-python-py3): 24.07 holds TensorRT-LLM 0.11.0,
    # 25.08 0.21.0, 25.12 1.1.0; 24.7 is 24.07 unpadded
    ("24.07", "0.11.0"), ("24.7", "0.11.0"), ("25.08-trtllm-python-py3", "0.21.0"), ("25.12", "1.1.0"),
])
def test_a_container_release_is_refused_naming_the_release_inside_it(text, inside):
    with pytest.raises(InputError) as err:
        trtllm_release(text)
    msg = str(err.value)
    assert "looks like a Triton/NGC container release (YY.MM), and TensorRT-LLM's own releases are 0.x and 1.x" in msg
    assert f"lists TensorRT-LLM {inside} in tritonserver:" in msg and f"so --engine-version {inside} if" in msg


@pytest.mark.parametrize("text", ["25.05-trtllm", "25.03", "24.12"])
def test_a_container_release_not_in_the_matrix_as_read_is_refused_without_a_guess(text):
    # 25.02–25.05 not shown on the pages read; 24.12: the matrix (0.16.0) and the release notes (release/0.15.0) differ
    with pytest.raises(InputError) as err:
        trtllm_release(text)
    msg = str(err.value)
    assert "looks like a Triton/NGC container release (YY.MM)" in msg and "lists TensorRT-LLM" not in msg
    assert "its start-up log prints it (\"TensorRT-LLM version: …\")" in msg


def test_releases_and_a_far_future_one_still_read():
    # 0.x and 1.x as TensorRT-LLM writes them; 99.0 (month 0: no container) stays the "newer than checked" case
    assert [trtllm_release(v) for v in ("0.11.0", "1.2.1", "1.0.0rc4", "99.0")] == [
        (0, 11, 0), (1, 2, 1), (1, 0, 0), (99, 0, 0)]
