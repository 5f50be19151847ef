"""Reasoning models: those whose chat template makes the model write a thinking section before its answer, so that
its outputs in use run far past a chat trace's. A config.json says nothing of it; the chat template in the model's
tokenizer_config.json (or chat_template.jinja) does, and no template is bundled, so the families are listed here by
Hub id with what their template does:

- DeepSeek-R1 and its distills: the generation prompt ends ``<｜Assistant｜><think>\\n`` (the template as updated after
  release; the model card asks that every reply start with ``<think>\\n``).
- Qwen3's hybrid release (Qwen3-0.6B … Qwen3-235B-A22B, their -FP8 builds): the template thinks unless the request
  sets ``enable_thinking=false`` (its ``enable_thinking is defined and enable_thinking is false`` branch writes an
  empty ``<think>\\n\\n</think>``); the 2507 -Instruct builds are non-thinking and not listed.
- Qwen's -Thinking builds (Qwen3-*-Thinking-2507, Qwen3-Next-80B-A3B-Thinking): the generation prompt opens
  ``<think>``.
- gpt-oss-20b/120b: the harmony template; the model reasons on its ``analysis`` channel before the ``final`` one, at
  the request's reasoning effort (default medium).
"""

from __future__ import annotations

import re

__all__ = ["reasoning_template"]

_FAMILIES = (
    (re.compile(r"^deepseek-ai/DeepSeek-R1(-0528)?(-Distill-[\w.-]+)?$", re.I),
     "its chat template opens every reply with <think>"),
    (re.compile(r"^Qwen/Qwen3-\d+(\.\d+)?B(-A\d+B)?(-FP8)?$", re.I),
     "its chat template thinks unless a request sets enable_thinking=false"),
    (re.compile(r"^Qwen/Qwen3-[\w.-]*-Thinking(-2507)?(-FP8)?$", re.I),
     "its chat template opens every reply with <think>"),
    (re.compile(r"^openai/gpt-oss-\d+b$", re.I),
     "its harmony chat template reasons on an analysis channel before the answer"),
)


def reasoning_template(hub_id: str) -> str | None:
    """What the chat template of the model ``hub_id`` (a Hub id as given, e.g. ``Qwen/Qwen3-8B``) does that makes it a
    reasoning model, in words; None where it is not one of the listed families."""
    return next((words for pat, words in _FAMILIES if pat.match(hub_id.strip())), None)
