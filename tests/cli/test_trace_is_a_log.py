"""A vLLM server log given to --trace: said to be a log and sent to `kvledger doctor`, not "unrecognised CSV layout
(found (APIServer pid=1) INFO …)" (the SRE trial)."""

from __future__ import annotations

from pathlib import Path

from cli_run import MODEL, refused

LOG = Path(__file__).parents[1] / "fixtures" / "vllm_logs" / "constructed_v1_preemptions_at_full_kv.log"


def test_a_server_log_as_trace_is_named_and_sent_to_doctor():
    msg = refused("simulate", MODEL, "--gpu", "H100", "--trace", str(LOG))
    # line 1 of the fixture: "(APIServer pid=1) INFO 11-04 14:58:02 [api_server.py:1896] vLLM API server version 0.11.0"
    assert "a server log, not a request trace (its first line is a log record: '(APIServer pid=1) INFO 11-04 14:58:02" \
        in msg
    assert "`kvledger doctor FILE` reads a vLLM server log" in msg and "azure: TIMESTAMP, ContextTokens" in msg
