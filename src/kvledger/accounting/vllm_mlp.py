"""The MLP's share of a decoder layer's activation peak in vLLM: gated (gate/up, act-and-mul) or plain (fc1, act).

Gated (``models/llama.py::LlamaMLP`` and its kin): ``gate_up_proj`` writes 2·I/TP per token and ``SiluAndMul``
writes I/TP while its input is still alive: 3·I/TP. Plain, in the model files named in
``catalog.mlp_kind.PLAIN_MLP_FILES`` (read in the vLLM 0.11.0 and 0.19.0 wheels, the same ``forward`` in both):
``fc1`` (``dense_h_to_4h``, ``c_fc``, ``fc_in``, ``up_proj``; a ``ColumnParallelLinear``) writes I/TP, the activation
from ``layers/activation.py::get_act_fn`` writes its own I/TP out of place while ``fc1``'s output is alive
(``nn.GELU``, ``nn.ReLU``; ``NewGELU``/``FastGELU``/``QuickGELU``: ``torch.empty_like`` in ``forward_cuda``, one fused
kernel when compiled), then ``fc2`` reads it: 2·I/TP. Falcon adds ``fc1``'s bias in place (``x += bias``), no extra
tensor.

Which file vLLM runs (by ``architectures``, else ``model_type``) and its MLP width are the catalog's rule
(``catalog/mlp_kind.py``), which also counts these MLPs' weights without a gate.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.catalog.mlp_kind import FOUR_H_FILES, plain_mlp_file
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["MlpPeak", "mlp_peak"]


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
    src = plain_mlp_file(model.architectures, model.model_type)
    # Nemotron-H's MLP layers are plain too (nemotron_h.py NemotronHMLP: up_proj → ReLUSquaredActivation → down_proj,
    # 0.11.0 and 0.19.0) but stay at 3·I/TP here: relu2's forward_cuda calls forward_native, square(relu(x)), so an
    # eager run (enforce_eager, V0) holds up_proj's output, relu's temporary and square's output, 3·I/TP exactly; the
    # compiled profile run (NemotronHModel is @support_torch_compile) lets Inductor fuse relu and square into one
    # kernel, 2·I/TP, or I/TP should it write over up_proj's dead output. Which one is not decidable without running
    # Inductor and no Nemotron-H start-up log is at hand, so the eager count, the upper bound, is kept.
    if src is None:
        return MlpPeak(model.intermediate_size, 3, "gate/up + act-and-mul, models/llama.py")
    # width: 4·h in falcon.py/bloom.py; else the parsed width (ffn_dim, n_inner, intermediate_size; mpt.py's
    # expansion_ratio × hidden), which the catalog fills with 4·h when the config leaves it absent (mlp_kind)
    h = model.hidden_size
    width = 4 * h if src in FOUR_H_FILES else model.intermediate_size or 4 * h
    return MlpPeak(width, 2, f"plain MLP: fc1's output and its activation's, vLLM 0.11/0.19 models/{src}")
