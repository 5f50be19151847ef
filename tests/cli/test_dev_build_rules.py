"""A vLLM development build is planned with the rules of the release before it, not the release it is numbered
toward. vLLM numbers builds with setuptools-scm at its defaults (0.11.0's pyproject.toml ``[tool.setuptools_scm]``, no
settings: the ``guess-next-dev`` scheme), which writes a commit N past tag X.Y.Z as X.Y.(Z+1).devN: 0.11.1.dev3 is
main three commits after 0.11.0, holding 0.11.0's code and more. Before, it was called "a pre-release, planned with
the rules of 0.11.1, the release it precedes", and planned with 0.11.1's version."""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json, refused, run_cli

from kvledger.accounting.vllm_releases import dev_build_base, prerelease_note
from kvledger.accounting.vllm_rules import parse_version


@pytest.mark.parametrize(("text", "rules"), [
    ("0.11.1.dev3+g1234abc", (0, 11, 0)),  # three commits past tag v0.11.0
    ("v0.13.1.dev8+g2841a84ac", (0, 13, 0)),  # the ROCm start-up build in vme_startups.csv
    ("0.20.2.dev1", (0, 20, 1)),
    ("0.12.0.dev4", (0, 11, 2)),  # X.Y.0.devN: the newest release before it, 0.11's last patch (LAST_PATCH: 0.11.2)
    ("0.11.1rc2.dev140+gabc", (0, 11, 1)),  # past tag v0.11.1rc1: a pre-release of 0.11.1
    ("0.33.0rc1", (0, 33, 0)), ("0.11.2+rhai1", (0, 11, 2)),  # a release candidate, a vendor's local tag
])
def test_the_rules_of_a_dev_build_are_the_release_before_it(text, rules):
    assert parse_version(text) == rules


def test_dev_build_base_is_none_for_anything_but_a_dev_build():
    others = ("0.11.1", "0.11.1rc1", "0.11.1.post1", "0.11.1+cu126")
    assert [dev_build_base(t, (0, 11, 1)) for t in others] == [None] * 4
    assert dev_build_base("0.11.1.dev3+g1234abc", (0, 11, 1)) == (0, 11, 0)


def test_the_note_says_which_release_and_the_plan_uses_it():
    note = prerelease_note("0.11.1.dev3+g1234abc")
    assert note.startswith("vLLM 0.11.1.dev3+g1234abc is a development build, planned with the rules of 0.11.0, the "
                           "newest release before it") and "pre-release" not in note and "precedes" not in note
    d = cli_json("plan", MODEL, "--gpu", "H100", "--engine-version", "0.11.1.dev3+g1234abc")
    assert d["settings"]["engine_version"] == d["memory"]["engine_version"] == "0.11.0"
    assert d["given"]["engine_version"] == "0.11.1.dev3+g1234abc"  # what the user typed is kept
    # the short plan shows the note, as it shows a pre-release's
    out = run_cli("plan", MODEL, "--gpu", "H100", "--engine-version", "0.11.1.dev3+g1234abc").stdout
    assert "note: vLLM 0.11.1.dev3+g1234abc is a development build, planned with the rules of 0.11.0" in out
    # a dev build toward the minor after the newest read (0.34.0.dev5) holds 0.33.0: no "newer than read" note
    newer = cli_json("plan", MODEL, "--gpu", "H100", "--engine-version", "0.34.0.dev5")
    assert newer["settings"]["engine_version"] == "0.33.0"
    assert not any("newer than the newest release" in n for n in newer["memory"]["notes"])


def test_a_release_not_read_names_the_rules_used():
    # 0.14.7: PyPI lists 0.14.0 and 0.14.1 only; the note names 0.14.1, whose rules apply
    out = run_cli("plan", MODEL, "--gpu", "H100", "--engine-version", "0.14.7").stdout
    assert "planned with the rules of 0.14.1, the newest 0.14 release" in out
    # 0.40.0: beyond the next minor of the newest read (0.33.0): refused, naming it
    assert "the newest known is 0.33.0 (the newest whose code was read)" in refused(
        "plan", MODEL, "--gpu", "H100", "--engine-version", "0.40.0")
