"""Which dense MLPs are plain (fc1 → activation → fc2) rather than gated, and how wide, by the model file vLLM runs.

vLLM picks the model file by the config's ``architectures`` (``models/registry.py``); a config without them is
matched by its ``model_type``. The files named here (read in the vLLM 0.11.0 and 0.19.0 wheels) build one ``fc1``
(``dense_h_to_4h``, ``c_fc``, ``fc_in``, ``up_proj``), an activation and ``fc2``: no gate. The catalog counts their
weights with this rule and ``accounting/vllm_mlp.py`` their activation peak, so the two cannot disagree.

Width: ``bloom.py``/``falcon.py`` take 4 × hidden whatever the config says (``BloomMLP``, ``FalconMLP``); ``mpt.py``
takes ``expansion_ratio`` × hidden (``MPTMLP``; transformers' ``MptMLP`` the same, ``MptConfig`` default 4); the
others the config's width (``ffn_dim``, ``n_inner``, ``intermediate_size``), 4 × hidden when it is absent or null
(``gpt2.py``, ``gpt_j.py``, ``gpt_bigcode.py``, ``phi.py``).
"""

from __future__ import annotations

from typing import Any

from kvledger.catalog.cfg import Cfg

__all__ = ["PLAIN_MLP_FILES", "PLAIN_MLP_TYPES", "FOUR_H_FILES", "plain_mlp_file", "plain_mlp_width"]

PLAIN_MLP_FILES = {"OPTForCausalLM": "opt.py", "GPT2LMHeadModel": "gpt2.py", "GPTBigCodeForCausalLM": "gpt_bigcode.py",
                   "GPTJForCausalLM": "gpt_j.py", "GPTNeoXForCausalLM": "gpt_neox.py",
                   "FalconForCausalLM": "falcon.py", "RWForCausalLM": "falcon.py", "PhiForCausalLM": "phi.py",
                   "BloomForCausalLM": "bloom.py", "MPTForCausalLM": "mpt.py", "MptForCausalLM": "mpt.py",
                   "Starcoder2ForCausalLM": "starcoder2.py"}
"""vLLM architectures whose MLP is plain (fc1 → activation → fc2), and the ``models/`` file read (0.11.0, 0.19.0)."""

PLAIN_MLP_TYPES = {"opt": "opt.py", "gpt2": "gpt2.py", "gpt_bigcode": "gpt_bigcode.py", "gptj": "gpt_j.py",
                   "gpt_neox": "gpt_neox.py", "falcon": "falcon.py", "RefinedWeb": "falcon.py",
                   "RefinedWebModel": "falcon.py", "phi": "phi.py", "bloom": "bloom.py", "mpt": "mpt.py",
                   "starcoder2": "starcoder2.py"}
"""The same files by the ``model_type`` their configs carry, for a config that lists no ``architectures``."""

FOUR_H_FILES = ("falcon.py", "bloom.py")
"""Files whose MLP width is 4 × hidden whatever the config says (``FalconMLP``, ``BloomMLP``)."""


def plain_mlp_file(architectures: Any, model_type: Any) -> str | None:
    """The vLLM model file of a plain MLP for these ``architectures`` (else ``model_type``), or None: gated.

    A config that lists architectures is decided by them alone, as vLLM's registry does; anything but a list of
    names counts as no list (``parse_config`` refuses it, naming the field)."""
    archs = [a for a in architectures if isinstance(a, str)] if isinstance(architectures, (list, tuple)) else []
    if archs:
        return next((PLAIN_MLP_FILES[a] for a in archs if a in PLAIN_MLP_FILES), None)
    return PLAIN_MLP_TYPES.get(model_type) if isinstance(model_type, str) else None


def plain_mlp_width(c: Cfg, src: str, h: int) -> int:
    """The width ``src`` builds its fc1 with, elements per token (rule in the module docstring)."""
    if src in FOUR_H_FILES:
        return 4 * h
    if src == "mpt.py":
        return c.int("expansion_ratio", 4, maximum=64) * h
    return c.int("intermediate_size", None) or 4 * h
