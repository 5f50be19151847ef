"""simulate says why a Mamba hybrid's TTFT moves between vLLM releases: align mode's block-aligned prefill chunks
(``Scheduler._mamba_block_aligned_split``) add steps that prefix caching off does not, and the flag that launches as
an older release did is named. Before, the note said only "these runs take the general step throughout (slower)",
which read like the simulator's speed."""

from __future__ import annotations

import pytest
from cli_run import cli_json

QWEN_NEXT = ("simulate", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--gpu", "H100", "--tp", "4", "--prompt-lengths",
             "fixed:2000", "--output-lengths", "fixed:3", "--num-requests", "1", "--rate", "1")


def _run(version: str, *extra: str) -> tuple[int, str]:
    d = cli_json(*QWEN_NEXT, "--engine-version", version, *extra)
    return d["summary"]["num_steps"], " ".join(d["notes"])


@pytest.mark.parametrize("version, steps", [
    # one 2,000-token prompt, 3 output tokens, max_num_batched_tokens 8,192 (one chunk could take it all):
    # 0.19: prefix caching off for hybrids → 1 prefill step + 2 decode steps = 3
    ("0.19.0", 3),
    # 0.28: on, align mode, B = 272: last cacheable stop 2000 − 2000 % 272 = 1,904 → chunks 0→1904, 1904→2000,
    # then 2 decode steps = 4 (one more)
    ("0.28.0", 4),
    # 0.33: on, but GDN on FlashInfer (sm90) exports a prefill-checkpoint page: the last chunk is not cut → 3
    ("0.33.0", 3)])
def test_steps_per_release_and_the_note_that_explains_them(version, steps):
    n, notes = _run(version)
    assert n == steps
    if version == "0.19.0":
        assert "--enable-prefix-caching launches as 0.26 on do" in notes
        return
    assert "Scheduler._mamba_block_aligned_split" in notes and "the general step throughout" not in notes
    assert "--no-enable-prefix-caching launches as vLLM before 0.26 did" in notes
    if version == "0.28.0":
        assert "B = 272 tokens" in notes and "ends at P − P % B" in notes
    else:
        assert "B = 320 tokens" in notes and "its state goes to a prefill-checkpoint page" in notes


def test_the_flag_given_keeps_the_older_launch_and_is_not_suggested_again():
    n, notes = _run("0.28.0", "--no-enable-prefix-caching")
    assert n == 3  # as 0.19: no cut
    assert "--no-enable-prefix-caching launches" not in notes
    n, notes = _run("0.19.0", "--enable-prefix-caching")
    assert n == 4  # 0.19's split is 0.28's (P − P % B, B = 272): 0→1904, 1904→2000, 2 decode steps
    assert "--no-enable-prefix-caching launches" not in notes and "B = 272 tokens" in notes
