"""Reader for the Qwen-Bailian KVCache traces: real multi-turn traffic with session ids, turn order and prefix blocks.

Source: ``alibaba-edu/qwen-bailian-usagetraces-anon`` (Apache-2.0; Wang et al., "KVCache Cache in the Wild:
Characterizing and Optimizing KVCache Cache at a Large Cloud Provider", USENIX ATC 2025): two-hour traces of one Qwen
serving instance on Aliyun Bailian (``qwen_traceA_blksz_16.jsonl`` to-C chat, ``qwen_traceB_blksz_16.jsonl`` to-B
API calling; later ``qwen_coder_…``, ``qwen_thinking_…``). One JSON object per line, fields as the dataset's README
documents them:

==================  ==================================================================================
``chat_id``         the request's id (integer)
``parent_chat_id``  the previous turn's ``chat_id``; -1 for a conversation's first request
``timestamp``       arrival, seconds from the trace's start
``input_length``    prompt tokens; ``output_length``: output tokens
``turn``            the turn number in its conversation (1 for the first)
``type``            text, search, image or file (kept out of the simulation)
``hash_ids``        salted hashes of consecutive 16-token prompt blocks, remapped to integers (equal id at equal
                    position = reusable KV)
==================  ==================================================================================

A request's session is its conversation: the root reached by following ``parent_chat_id`` inside the file; a
conversation whose root lies before the file's window is keyed by the first missing parent, so its later turns still
share one session. The session becomes the request's ``client_id`` (``session-<id>``), which the ``session_affinity``
router keeps on one replica; ``hash_ids`` become prefix segments of 16 tokens (vLLM's default block size).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvledger.dynamics.workload.trace_arrow import MAX_TRACE_TOKENS as _MAX_TOKENS
from kvledger.errors import FormatError

__all__ = ["BAILIAN_KEYS", "BAILIAN_BLOCK_TOKENS", "BailianRows", "read_bailian"]

BAILIAN_KEYS = ("chat_id", "parent_chat_id", "timestamp", "input_length", "output_length")
BAILIAN_BLOCK_TOKENS = 16  # the dataset README: "Salted SipHash blocks (16 tokens per block)"


@dataclass(frozen=True, slots=True)
class BailianRows:
    """The file's rows in file order. arrivals_s: s from the earliest row; prompt_tokens / output_tokens: tokens;
    segments: hash ids per row; sessions: ``session-<root chat id>`` per row; turns: turn numbers."""

    arrivals_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    segments: list[tuple[int, ...]]
    sessions: list[str]
    turns: list[int]


def _whole(obj: dict, key: str, lo: int, path: Path, line: int) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) and not (isinstance(v, float) and v.is_integer()):
        raise FormatError(str(path), f"{v!r} is not a whole number", f"line {line}, field {key!r}")
    if int(v) < lo:
        raise FormatError(str(path), f"{int(v)} must be ≥ {lo}", f"line {line}, field {key!r}")
    return int(v)


def _row(obj: object, path: Path, line: int) -> tuple[int, int, float, int, int, int, tuple[int, ...]]:
    if not isinstance(obj, dict):
        raise FormatError(str(path), "each line must be a JSON object", f"line {line}")
    missing = [k for k in BAILIAN_KEYS if k not in obj]
    if missing:
        raise FormatError(str(path), f"missing field {missing[0]!r}", f"line {line}")
    chat, parent = _whole(obj, "chat_id", 0, path, line), _whole(obj, "parent_chat_id", -1, path, line)
    t = obj["timestamp"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise FormatError(str(path), f"time {t!r} must be a finite number of seconds ≥ 0", f"line {line}, field "
                          "'timestamp'")
    p, o = _whole(obj, "input_length", 1, path, line), _whole(obj, "output_length", 1, path, line)
    if max(p, o) > _MAX_TOKENS:
        raise FormatError(str(path), f"token count {max(p, o):,} exceeds {_MAX_TOKENS:,}", f"line {line}")
    turn = _whole(obj, "turn", 1, path, line) if "turn" in obj else 1
    ids = obj.get("hash_ids", [])
    if not isinstance(ids, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in ids):
        raise FormatError(str(path), "must be a list of integer block ids", f"line {line}, field 'hash_ids'")
    full, spanned = p // BAILIAN_BLOCK_TOKENS, -(-p // BAILIAN_BLOCK_TOKENS)
    if ids and len(ids) not in (full, spanned):  # whole blocks only, or the last partial block hashed too
        raise FormatError(str(path), f"has {len(ids)} block ids but the prompt of {p} tokens holds {full} whole "
                          f"blocks of {BAILIAN_BLOCK_TOKENS} tokens ({spanned} with the partial one)",
                          f"line {line}, field 'hash_ids'")
    return chat, parent, float(t), p, o, turn, tuple(ids)


def read_bailian(path: str | Path) -> BailianRows:
    """Parse a Qwen-Bailian trace file (module doc).

    Raises:
        FormatError: unreadable JSON, a missing field, a bad number, a ``chat_id`` given twice (file, line, field).
    """
    p = Path(path)
    rows = []
    with p.open(encoding="utf-8") as f:
        for line, text in enumerate(f, start=1):
            if text.strip():
                try:
                    obj = json.loads(text)
                except (json.JSONDecodeError, RecursionError):
                    raise FormatError(str(p), "not valid JSON", f"line {line}") from None
                rows.append((line, _row(obj, p, line)))
    if not rows:
        raise FormatError(str(p), "no data rows")
    parent_of: dict[int, int] = {}
    for line, r in rows:
        if r[0] in parent_of:
            raise FormatError(str(p), f"chat_id {r[0]} appears twice", f"line {line}")
        parent_of[r[0]] = r[1]
    times = np.asarray([r[2] for _, r in rows], dtype=np.float64)
    roots: dict[int, int] = {}
    return BailianRows(times - times.min(), np.asarray([r[3] for _, r in rows], dtype=np.int64),
                       np.asarray([r[4] for _, r in rows], dtype=np.int64), [r[6] for _, r in rows],
                       [f"session-{_root(r[0], parent_of, roots)}" for _, r in rows], [r[5] for _, r in rows])


def _root(chat: int, parent_of: dict[int, int], roots: dict[int, int]) -> int:
    """The conversation's first chat id in the file, or the first parent missing from it (a cycle stops the walk);
    ``roots`` remembers each answer."""
    path, seen = [chat], {chat}
    while path[-1] not in roots:
        parent = parent_of.get(path[-1], -1)
        if parent == -1 or parent in seen:
            roots[path[-1]] = path[-1]
        elif parent not in parent_of:
            roots[path[-1]] = parent
        else:
            path.append(parent)
            seen.add(parent)
    root = roots[path[-1]]
    roots.update(dict.fromkeys(path, root))
    return root
