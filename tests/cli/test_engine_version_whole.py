"""``--engine-version`` is one whole release string: a list or trailing text is refused (exit 2), not read as its first
release. PEP 440 forms vLLM publishes or builds print (post releases 0.10.1.1, rc, dev builds, local tags) still parse.
"""

from __future__ import annotations

import pytest
from cli_run import MODEL, refused

from kvledger.accounting.vllm_rules import parse_version
from kvledger.errors import InputError


@pytest.mark.parametrize("v, ver", [("0.10.1.1", (0, 10, 1)), ("0.24.0rc1", (0, 24, 0)), ("v0.33.0", (0, 33, 0)),
                                    ("v0.13.1.dev8+g2841a84ac", (0, 13, 0)), ("0.11.2+rhai1", (0, 11, 2))])
def test_whole_release_strings_parse(v, ver):
    # a dev build is the release before it (vllm_releases.dev_build_base): 0.13.1.dev8 is main 8 commits past 0.13.0
    assert parse_version(v) == ver


@pytest.mark.parametrize("v", ["0.19.0,0.33.0", "0.19.0 0.33.0", "0.19.0xyz"])
def test_a_list_or_trailing_text_is_refused_not_read_as_its_first_release(v):
    # before: "0.19.0,0.33.0" planned 0.19.0 alone (27,721 blocks for Llama-3.1-8B on H100) and said nothing
    with pytest.raises(InputError, match="is not one version like 0.10.2"):
        parse_version(v)
    assert refused("plan", MODEL, "--gpu", "H100", "--engine-version", v).startswith(
        f"--engine-version {v!r} is not one version like 0.10.2")  # the console entry: one paragraph, exit 2


def test_sglang_versions_alike():
    # the SGLang parser read "0.5.23,0.4.9" as 0.5.23 too; its post releases (0.4.6.post2 changed the default
    # fraction) still count
    from kvledger.accounting.sglang_rules import parse_sglang_version

    assert parse_sglang_version("0.4.6.post2") == (0, 4, 6, 2) and parse_sglang_version("0.5.3rc0") == (0, 5, 3)
    with pytest.raises(InputError, match="is not one SGLang version like 0.5.3"):
        parse_sglang_version("0.5.23,0.4.9")


@pytest.mark.parametrize("cmd", [("plan", MODEL, "--gpu", "H100"), ("simulate", MODEL, "--gpu", "H100"),
                                 ("plan", MODEL, "--gpu", "H100", "--engine", "sglang")])
@pytest.mark.parametrize("v", ["", "  "])
def test_an_empty_version_is_refused_not_read_as_the_newest(cmd, v):
    # before: `--engine-version "$VLLM_VERSION"` with the variable unset planned 0.33.0 (`s.engine_version or LATEST`)
    # and said nothing; now the one-paragraph error (exit 2 at the console entry)
    assert refused(*cmd, "--engine-version", v).startswith(f"--engine-version {v!r} is empty")


@pytest.mark.parametrize("v", ["1.2.1,0.21.0", "1.2.1xyz", "1.2.1 0.21.0"])
def test_trtllm_versions_alike(v):
    # TensorRT-LLM's parser (plan_other.trtllm_runtime) read "1.2.1,0.21.0" as 1.2.1 too; an rc still parses
    from kvledger.accounting.plan_other import trtllm_runtime

    assert trtllm_runtime("1.2.0rc1") == ("pytorch", "1.2.0rc1 (PyTorch backend rules)")  # 1.x: PyTorch backend
    with pytest.raises(InputError, match="is not one TensorRT-LLM version like 0.13.0 or 1.2.1"):
        trtllm_runtime(v)
    assert refused("plan", MODEL, "--gpu", "H100", "--engine", "trtllm", "--engine-version", v).startswith(
        f"--engine-version {v!r} is not one TensorRT-LLM version")


def test_plan_refuses_a_container_release_as_the_tensorrt_llm_version():
    # --engine trtllm --engine-version 24.07 was planned as "trtllm 24.07" (PyTorch backend rules, as from 1.0); 24.07
    # is the tritonserver container holding TensorRT-LLM 0.11.0 (the TensorRT-engine executor)
    msg = refused("plan", MODEL, "--gpu", "H100", "--engine", "trtllm", "--engine-version", "24.07")
    assert msg.startswith("--engine-version '24.07' is not one TensorRT-LLM version like 0.13.0 or 1.2.1: 24.07 looks "
                          "like a Triton/NGC container release (YY.MM)")
    assert "--engine-version 0.11.0 if that is your container" in msg
