"""``--engine-version`` naming a patch release vLLM never published (0.19.7) is planned with a note that says so.

The release list is PyPI's (``https://pypi.org/pypi/vllm/json``, read 2026-12-06): 0.19 has 0.19.0 and 0.19.1 only,
0.20 has 0.20.0–0.20.2, 0.12 only 0.12.0. Version rules are keyed by thresholds, so 0.19.7 gets 0.19.1's rules.
"""

from __future__ import annotations

from cli_run import MODEL, cli_json, run_cli

from kvledger.accounting.vllm_releases import release_exists, unknown_release_note


def test_release_list_knows_the_patches_pypi_lists():
    assert release_exists((0, 19, 1)) and release_exists((0, 20, 2)) and release_exists((0, 34, 0))
    assert release_exists((0, 19, 7)) is False and release_exists((0, 12, 1)) is False
    assert release_exists((0, 35, 0)) is None  # a minor past the list: not judged here (parse_version's rule)
    assert unknown_release_note((0, 20, 2)) is None


def test_plan_names_a_patch_release_that_does_not_exist():
    out = run_cli("plan", MODEL, "--gpu", "H100", "--engine-version", "0.19.7").stdout
    assert ("note: vLLM 0.19.7 is no release: PyPI lists 0.19.0, 0.19.1 for 0.19 (its release list, read 2026-12-06); "
            "planned with the rules of 0.19.1, the newest 0.19 release") in out
    # the same plan as 0.19.1's: 27,721 blocks for Llama-3.1-8B on H100 at vLLM 0.19's defaults (gmu 0.9)
    a = cli_json("plan", MODEL, "--gpu", "H100", "--engine-version", "0.19.7")["memory"]["num_gpu_blocks"]
    b = cli_json("plan", MODEL, "--gpu", "H100", "--engine-version", "0.19.1")["memory"]["num_gpu_blocks"]
    assert a == b == 27_721
    assert "is no release" not in run_cli("plan", MODEL, "--gpu", "H100", "--engine-version", "0.19.1").stdout


def test_doctor_says_it_too():
    # the real vLLM 0.19.0 start-up (Llama-3.1-8B-Instruct, H100): --engine-version 0.19.7 is warned of as another
    # release than the log's, and named as no release at all
    from pathlib import Path

    log = (Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "logs"
           / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")
    d = cli_json("doctor", str(log), "--engine-version", "0.19.7")
    assert any(n.startswith("vLLM 0.19.7 is no release: PyPI lists 0.19.0, 0.19.1") for n in d["notes"])
