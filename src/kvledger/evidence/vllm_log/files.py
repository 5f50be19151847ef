"""Reading a vLLM log file, and refusing what is not a vLLM log (another engine's, a table, a binary file)."""

from __future__ import annotations

import sys
from pathlib import Path

from kvledger.errors import FormatError, InputError
from kvledger.evidence.prometheus_text import SCRAPE_ADVICE
from kvledger.evidence.vllm_log.engines import ENGINE_NAMES
from kvledger.evidence.vllm_log.restarts import parse_vllm_log
from kvledger.evidence.vllm_log.types import VllmLog

__all__ = ["read_vllm_log", "require_vllm", "UnsupportedLogError"]


class UnsupportedLogError(FormatError):
    """The file is a log, but not from vLLM (or holds no vLLM lines at all)."""


def require_vllm(log: VllmLog) -> VllmLog:
    """The log itself when it holds vLLM lines.

    Raises:
        UnsupportedLogError: a table or JSON document (``not_log.py``), a log from another engine (named, with the
            line that identified it), or
            a file with no vLLM start-up, metrics or preemption lines.
    """
    if log.not_a_log and log.not_a_log.startswith("a Prometheus"):
        raise UnsupportedLogError(log.source, f"this is {log.not_a_log}, not a vLLM server log: doctor reads a "
                                  "scrape from a file, not standard input (`curl -s HOST:8000/metrics > metrics.txt; "
                                  f"kvledger doctor metrics.txt`); {SCRAPE_ADVICE}")
    if log.not_a_log:
        raise UnsupportedLogError(log.source, f"this is {log.not_a_log}, not a vLLM server log: no line carries vLLM's "
                                  "logger header ('INFO 03-21 20:15:45 [gpu_worker.py:267] …'), so vLLM messages "
                                  "quoted in it are not events. kvledger doctor reads the text `vllm serve` "
                                  "prints (its stdout/stderr)")
    if log.engine == "vllm":
        return log
    if log.engine in ENGINE_NAMES:
        raise UnsupportedLogError(log.source, f"this log comes from {ENGINE_NAMES[log.engine]}, not vLLM "
                                  f"({log.engine_evidence}); kvledger doctor reads vLLM server logs only")
    raise UnsupportedLogError(log.source, f"no vLLM log lines in {log.total_lines:,} line(s): looked for start-up "
                              "lines ('Available KV cache memory', '# GPU blocks', 'GPU KV cache size', 'Maximum "
                              "concurrency for'), metrics lines ('Avg prompt throughput: …') and preemption warnings. "
                              "Is this a vLLM server log?")


STDIN = "-"
"""The path that names standard input (``cat server.log | kvledger doctor -``), as in cat, grep and tar."""


def _read_bytes(p: Path) -> bytes:
    """The file's bytes; standard input's where the path is ``-`` (read as bytes, as a file is)."""
    return sys.stdin.buffer.read() if str(p) == STDIN else p.read_bytes()


def read_vllm_log(path: str | Path) -> VllmLog:
    """Read and check a vLLM log file (``-``: standard input).

    Raises:
        InputError: the file does not exist or cannot be read.
        UnsupportedLogError: see ``require_vllm``.
    """
    p = Path(path)
    try:
        raw = _read_bytes(p)
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except OSError as err:
        raise InputError(f"{p}: cannot read the log ({err.strerror or err})") from None
    piped = str(p) == STDIN
    p = Path("<stdin>") if piped else p
    if not raw.strip():
        raise InputError("<stdin>: standard input is empty" if piped else f"{p}: the file is empty")
    if raw[:2] == b"\x1f\x8b":  # gzip's magic number: a rotated log
        how = "zcat server.log.gz | kvledger doctor -" if piped else f"zcat {p} > server.log"
        raise InputError(f"{p}: the {'input' if piped else 'file'} is gzip-compressed; decompress it first ({how})")
    # newline="": keep "\r" (no universal newlines), as the text reader did
    log = parse_vllm_log(raw.decode("utf-8", errors="replace"), str(p))
    if log.engine != "vllm" and not log.not_a_log and b"\x00" in raw[:8192]:
        # nothing of vLLM read and NUL bytes: a binary file (a log a crash padded with NULs still reads as a log)
        raise InputError(f"{p}: the file is binary, not a text log")
    return require_vllm(log)
