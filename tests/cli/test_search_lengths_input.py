"""``search --prompt-lengths/--output-lengths`` that the synthetic workload cannot read are bad input, refused before
any candidate (exit 2, the flag named): each candidate's simulation failed on them instead, and the search ended with
status 1, "2 candidate(s) could not be evaluated" and --resume advice that could not help."""

from __future__ import annotations

import pytest
from cli_run import refused

SEARCH = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s", "--gpus", "L4,H100", "--tp", "1", "--max-model-len",
          "8K", "--num-requests", "60", "--rate", "50"]
FORMS = ("use N or fixed:N, uniform:LOW:HIGH, exp:MEAN:CAP, lognormal:MEDIAN:SIGMA[:LOW[:HIGH]], "
         "trace:NAME:prompt|output or mix:W*DIST,W*DIST")


@pytest.mark.parametrize("prompt, output, flag, text", [
    ("many", "fixed:1", "--prompt-lengths", "many"),  # a bare count (1000) now means fixed:1000: a word instead
    ("fixed:1000", "lots", "--output-lengths", "lots"),
])
def test_unreadable_lengths_are_refused_naming_the_flag(prompt, output, flag, text):
    assert refused(*SEARCH, "--prompt-lengths", prompt, "--output-lengths", output) == (
        f"{flag}: length distribution {text!r} not understood; {FORMS}")
