"""The MLP's share of a decoder layer's activation peak in vLLM: gated (gate/up, act-and-mul) or plain (fc1, act).

Gated (``models/llama.py::LlamaMLP`` and its kin): ``gate_up_proj`` writes 2·I/TP per token and ``SiluAndMul``
writes I/TP while its input is still alive: 3·I/TP. Plain, in the model files named in ``PLAIN_MLP_FILES``
(read in the vLLM 0.11.0 and 0.19.0 wheels, the same ``forward`` in both): ``fc1`` (``dense_h_to_4h``, ``c_fc``,
``fc_in``, ``up_proj``; a ``ColumnParallelLinear``) writes I/TP, the activation from
``layers/activation.py::get_act_fn`` writes its own I/TP out of place while ``fc1``'s output is alive (``nn.GELU``,
``nn.ReLU``; ``NewGELU``/``FastGELU``/``QuickGELU``: ``torch.empty_like`` in ``forward_cuda``, one fused kernel when
compiled), then ``fc2`` reads it: 2·I/TP. Falcon adds ``fc1``'s bias in place (``x += bias``), no extra tensor.

vLLM picks the model file by the config's ``architectures`` (``models/registry.py``); a config without them is
matched by its ``model_type``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.catalog.modelspec import ModelSpec

__all__ = ["PLAIN_MLP_FILES", "PLAIN_MLP_TYPES", "MlpPeak", "mlp_peak"]

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

_FOUR_H_FILES = ("falcon.py", "bloom.py")
"""Files whose MLP width is 4 × hidden whatever the config says (``FalconMLP``, ``BloomMLP``)."""


@dataclass(frozen=True)
class MlpPeak:
    """The MLP tensors live at its peak: ``copies`` × ``width``/TP elements per token, and why."""

    width: int
    copies: int
    source: str

    @property
    def elements(self) -> int:
        """Elements per token live at the MLP's peak before TP sharding, count."""
        return self.copies * self.width


def mlp_peak(model: ModelSpec) -> MlpPeak:
    """The dense MLP of ``model`` as vLLM runs it, gated or plain (MoE layers: ``vllm_profile``)."""
    archs = model.architectures
    src = (next((PLAIN_MLP_FILES[a] for a in archs if a in PLAIN_MLP_FILES), None) if archs
           else PLAIN_MLP_TYPES.get(model.model_type))
    if src is None:
        return MlpPeak(model.intermediate_size, 3, "gate/up + act-and-mul, models/llama.py")
    # width: 4·h in falcon.py/bloom.py; else the config's (ffn_dim, n_inner, intermediate_size), 4·h when absent
    # (gpt2.py, gpt_j.py, gpt_bigcode.py, phi.py: n_inner None → 4 × hidden; mpt.py: expansion_ratio × hidden, 4 by
    # default, not read here)
    h = model.hidden_size
    width = 4 * h if src in _FOUR_H_FILES else model.intermediate_size or 4 * h
    return MlpPeak(width, 2, f"plain MLP: fc1's output and its activation's, vLLM 0.11/0.19 models/{src}")
