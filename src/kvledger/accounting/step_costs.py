"""The FLOPs, bytes and times of one roofline step on one GPU, split by term (``kvledger.accounting.roofline`` fills
and prices them)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StepCosts"]


@dataclass(frozen=True)
class StepCosts:
    """FLOPs and bytes of one step on one GPU, split by term.

    Attributes:
        matmul_flops / attn_flops: FLOPs, FLOP. weight_bytes / kv_bytes: HBM bytes read (KV: read + new writes), B.
        prefill_attn_flops / prefill_kv_bytes: the prefill chunks' share of attn_flops / kv_bytes (split-kernel
            backends price it apart from the decodes'), FLOP / B.
        allreduce_s: TP all-reduce time of the step, s (0 at TP 1).
        expert_flops: the routed experts' share of matmul_flops (filled only when MoE terms are modelled), FLOP;
            expert_time_factor: busiest-rank imbalance ÷ grouped-GEMM efficiency (moe_terms.py), ≥ 1;
            all_to_all_s: expert parallelism's dispatch + combine time, s.
        host_s: host time in series with the GPU, ``host_step_s + host_seq_s × sequences``, s (0 unless set).
        matmul_efficiency: the weight GEMMs' measured share of peak at the step's tokens (``gemm_efficiency.py``),
            which divides their FLOP time; 1.0 without a measured curve.
        layer_kernels_s: the layers' norm, RoPE, activation and unfused add kernels (``layer_kernels.py``), s; 0 without
            the measured pricing.
        expert_bytes: the routed experts' share of weight_bytes (filled with moe_kernel_s), B; moe_kernel_s: the
            fused-MoE kernels of every MoE layer (``moe_kernel.py``), which then price the routed experts in place of
            their FLOPs and bytes in the weight roofline, s (0 for dense models).
    """

    matmul_flops: float
    attn_flops: float
    weight_bytes: float
    kv_bytes: float
    prefill_attn_flops: float = 0.0
    prefill_kv_bytes: float = 0.0
    allreduce_s: float = 0.0
    expert_flops: float = 0.0
    expert_time_factor: float = 1.0
    all_to_all_s: float = 0.0
    host_s: float = 0.0
    matmul_efficiency: float = 1.0
    layer_kernels_s: float = 0.0
    expert_bytes: float = 0.0
    moe_kernel_s: float = 0.0

    @property
    def flops(self) -> float:
        return self.matmul_flops + self.attn_flops

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes

    def weight_terms_s(self, p: float, pe: float, b: float) -> tuple[float, float]:
        """(the weight matmuls' FLOP time, their weight-read time), s, as ``RooflineStepCost.time_s`` prices the two
        sides of their max: FLOPs at the achievable FLOP/s ``p`` (routed experts at ``pe`` where their MMA dtype
        differs, at their time factor, or apart in ``moe_kernel_s``), over the measured GEMM efficiency; weight
        bytes (less the routed experts' where those are apart) at the achievable bandwidth ``b``, B/s. The larger
        is the weight GEMMs' bound, the one the step pays."""
        if self.moe_kernel_s:  # the routed experts in their own term (moe_kernel.py), added after the dense ones
            mm, wb = (self.matmul_flops - self.expert_flops) / p, self.weight_bytes - self.expert_bytes
        else:
            ef = self.expert_flops
            mm = (self.matmul_flops - ef + ef * self.expert_time_factor) / p if pe == p else (
                (self.matmul_flops - ef) / p + ef * self.expert_time_factor / pe)
            wb = self.weight_bytes
        if self.matmul_efficiency != 1.0:  # the measured GEMM curve (gemm_efficiency.py); flat: no operation at all
            mm = mm / self.matmul_efficiency
        return mm, wb / b
