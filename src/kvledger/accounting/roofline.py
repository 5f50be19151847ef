"""The roofline of one engine step: FLOPs and HBM bytes of a prefill chunk or a decode step, per GPU.

Step time lower bound = max(FLOPs / peak FLOP/s, bytes / HBM bandwidth) (Williams et al., "Roofline",
CACM 2009). Weight matmuls cost 2 FLOPs per active parameter per token and read the weights once per
step; attention costs 4·H_q·d FLOPs per (query, key) pair and reads every sequence's KV; MoE reads only
the experts the step's tokens touch: E·(1 − (1 − k/E)^T) per layer for T tokens under uniform routing.
("How to Scale Your Model", chapters "Rooflines" and "All About Transformer Inference".)

How vLLM executes the step, and what that changes here:

* attention runs at the attention dtype's peak: bf16 unless the KV cache is fp8, whatever the weights
  (FlashAttention and the MLA kernels, ``vllm/v1/attention/backends/flash_attn.py``);
* MLA prefill tokens take the non-absorbed path (``mla_attention.py : MLAAttention.forward_impl`` →
  ``forward_mha``: per head QK over ``qk_nope + qk_rope`` dims, PV over ``v_head_dim``, with the cached
  context re-expanded through ``kv_b_proj``), decode tokens the absorbed one (``forward_mqa``);
* split-kernel backends (MLA; FlashInfer) run prefill and decode attention one after the other, so
  their terms add; FlashAttention's one varlen kernel overlaps them (one joint term);
* a tied LM head reads the embedding matrix every step (``LlamaForCausalLM``: ``lm_head.tie_weights``);
* at TP > 1 two all-reduces per layer (tp_comm.py);
* with ``weights_bytes`` (``--weights-memory``, the engine's "Loading weights took") every weight
  read scales by measured / computed weight bytes;
* ``gemm_curve`` (``--gemm-efficiency measured``): dense BF16 weight matmuls at ``flops_fraction`` × the GPU's
  measured efficiency e(T, N·K) (``gemm_efficiency.py``, which says how attention's share is set), then each layer's
  norm, RoPE, activation and add kernels (``layer_kernels.py``);
* ``host_step_s`` + ``host_seq_s`` × sequences: host time each step spends in series with the GPU (scheduling,
  input preparation, sampling and output processing the engine does not hide), the same for every model on a host
  (Vidur's ``cpu_overheads`` tables: about 1.2 ms + 0.04 ms per sequence for Llama-2-7B and phi-2 alike on A100
  hosts). 0 unless a GPU-scope fit (``kvledger.calibration.gpu_fit``, ``fit_host``) sets them.
"""

from __future__ import annotations

from kvledger.accounting import moe_terms
from kvledger.accounting.attention_terms import attention_terms
from kvledger.accounting.decode_prices import DecodePrices
from kvledger.accounting.fp8_block import compute_dtype
from kvledger.accounting.gemm_efficiency import GemmCurve, MeasuredGemm
from kvledger.accounting.kvcache import KVLedger
from kvledger.accounting.moe_kernel import FusedMoePrices
from kvledger.accounting.moe_terms import ep_all_to_all_bytes, ep_imbalance, grouped_gemm_efficiency, tokens_per_expert
from kvledger.accounting.step_costs import StepCosts
from kvledger.accounting.stepcost import StepShape
from kvledger.accounting.tp_comm import allreduce_step_s
from kvledger.accounting.tp_network import allreduce_terms
from kvledger.accounting.weightmem import expert_bytes_per_gpu, weight_bytes_per_gpu
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["StepCosts", "RooflineStepCost", "compute_dtype", "attention_dtype"]


def attention_dtype(kv: KVLedger, gpu: GpuSpec) -> str:
    """fp8 when the KV cache is fp8 and the GPU has fp8 tensor cores, else bf16; bf16 for DeepSeek's packed fp8_ds_mla
    cache (its sparse kernels dequantize to BF16 and run BF16 MMAs: FlashMLA's 2025-09-29 Hopper FP8 sparse deep dive;
    SM120's FlashInfer kernel taken alike), so auto and fp8 price alike where vLLM stores that cache for both."""
    if any(getattr(g.spec, "packed_entry_bytes", 0) for g in kv.groups):
        return "bf16"
    return "fp8" if kv.kv_cache_dtype.lower().startswith("fp8") and gpu.fp8_flops_per_s else "bf16"


class RooflineStepCost(DecodePrices, MeasuredGemm, FusedMoePrices):
    """Per-GPU roofline costs for one model on one GPU at a TP degree; also a StepCostModel for the simulator.

    Args:
        model, gpu, kv: the parsed model, the GPU, and the KV ledger at the serving dtype and TP.
        tp: tensor-parallel degree.
        flops_fraction / bandwidth_fraction: achievable shares of peak (defaults 0.7 and 0.8: assumptions —
            cuBLAS GEMMs and decode attention kernels typically reach 70–80% and 80–90% of datasheet peaks;
            calibrate against a measurement where you have one).
        cpu_overhead_s: fixed per-step time (scheduling, sampling, launch), s.
        overlap_cpu: the CPU overhead overlaps the GPU (vLLM's async scheduling): a step takes
            max(GPU time, overhead) instead of their sum.
        weights_bytes: measured weight memory per GPU, B (``--weights-memory``); scales every weight read.
        split_attention: prefill and decode attention as separate kernels (terms add); None → True for
            MLA models (vLLM's MLA backends), False otherwise (FlashAttention's one varlen kernel).
        allreduce_latency_s: per-call NCCL all-reduce latency, s; None → the fit in tp_comm.py.
        custom_allreduce_max_bytes: calls under this size run vLLM's custom all-reduce (tp_comm.py), B; 0: off.
        allreduce_link_share: a GPU profile's share of the link's one-direction bandwidth the TP all-reduces (and EP's
            all-to-all) achieve; None: the catalog link (over PCIe, ``tp_comm.PCIE_ALLREDUCE_SHARE`` of it).
        tp_nodes / inter_node_link_bytes_per_s: nodes one TP group spans and a GPU's NIC, B/s one direction (None: the
            assumed 400 Gb/s); past one node the all-reduce is NCCL's ring over the NICs (tp_network.py).
        host_step_s / host_seq_s: host time per step and per sequence in the step that runs in series with the GPU
            (module docstring), s; 0 by default.
        gemm_curve: the GPU's measured matmul efficiency (``gemm_efficiency.GemmCurve``), which ``flops_fraction`` then
            scales (1.0: as measured); None: the flat fraction. Ignored for MoE and FP8 models (not measured).
        ep / grouped_gemm_half_tokens / all_to_all: MoE only (``moe_terms.py``) — expert-parallel ranks, the grouped
            GEMM's half-rate tokens per expert, EP's all-to-all (vLLM's: data parallel > 1 only); defaults model none.
            mxfp4_moe: the release's own kernel for MXFP4 experts where it differs (``moe_rows.expert_kernel``).
        carried_fit: layer-kernel floors for a GPU without its own (``carried_kernels.carried_layer_kernel_fit``).
    """

    name = "roofline"

    def __init__(self, model: ModelSpec, gpu: GpuSpec, kv: KVLedger, tp: int = 1, *, flops_fraction: float = 0.7,
                 bandwidth_fraction: float = 0.8, cpu_overhead_s: float = 0.0, overlap_cpu: bool = False,
                 weights_bytes: float | None = None, split_attention: bool | None = None,
                 allreduce_latency_s: float | None = None, ep: int = 1, grouped_gemm_half_tokens: float = 0.0,
                 custom_allreduce_max_bytes: float = 0.0, host_step_s: float = 0.0, host_seq_s: float = 0.0,
                 gemm_curve: GemmCurve | None = None, allreduce_link_share: float | None = None,
                 all_to_all: bool = False, moe_config=None, tp_nodes: int = 1,
                 inter_node_link_bytes_per_s: float | None = None, mxfp4_moe: str = "", carried_fit=None) -> None:
        self.model, self.gpu, self.kv, self.tp = model, gpu, kv, tp
        self.dtype = compute_dtype(model, gpu)
        self.peak_flops = gpu.fp8_flops_per_s if self.dtype == "fp8" else gpu.bf16_flops_per_s
        self.attn_dtype = attention_dtype(kv, gpu)
        self.attn_peak_flops = gpu.fp8_flops_per_s if self.attn_dtype == "fp8" else gpu.bf16_flops_per_s
        self.bw = gpu.hbm_bandwidth_bytes_per_s
        self.flops_fraction, self.bandwidth_fraction = flops_fraction, bandwidth_fraction
        self.cpu_overhead_s, self.overlap_cpu = cpu_overhead_s, overlap_cpu
        self.host_step_s, self.host_seq_s = host_step_s, host_seq_s
        self._init_weights(model, tp, weights_bytes, ep)
        self.allreduce_link_share, self.all_to_all = allreduce_link_share, all_to_all and ep > 1
        self._init_allreduce(model, gpu, tp, allreduce_latency_s, tp_nodes, inter_node_link_bytes_per_s)
        self.custom_allreduce_max_bytes = custom_allreduce_max_bytes if tp > 1 else 0.0
        head = model.vocab_size * model.hidden_size
        emb_params = sum(w.numel for w in model.weights if "embed" in w.path)
        lm_params = 0 if model.tie_word_embeddings else head
        self.matmul_params = (model.num_active_params - emb_params - lm_params) / tp  # per token, excluding the head
        self.head_flops_per_seq = 2 * head / tp
        at = attention_terms(model, kv, tp, self.attn_peak_flops / (gpu.fp8_flops_per_s or self.attn_peak_flops))
        self.attn_flops_per_pair = at.full  # FLOPs per (decode query, key) pair over the unbounded layers, FLOP
        self.window_terms = at.windows  # [(FLOPs per pair, B per token, window tokens)] of the windowed layers
        self.prefill_flops_per_pair = at.prefill  # FLOPs per prefill (query, key) pair, FLOP
        self.upproj_flops_per_token = at.upproj  # MLA's FLOPs per cached-context token of a prefill chunk, FLOP
        self.growing_read_bytes = at.growing_read_bytes  # KV bytes a step reads per context token, B/token
        self.carried_fit = carried_fit
        self._init_gemm_curve(model, gemm_curve)
        has_mla = any(isinstance(g.spec, MLAAttention) for g in kv.groups)
        self.split_attention = has_mla if split_attention is None else split_attention
        self.state_bytes = kv.state_bytes_per_seq - at.window_state_bytes
        self._gemm_cache: dict[int, float] = {}
        self._list_consts: dict[int, tuple] = {}  # per batch size: gemm s, state bytes, all-reduce s, the plain form's
        self._token_terms: dict[int, tuple[float, float, float, float]] = {}  # per step tokens: token_terms()
        pa, b = self.attn_peak_flops * self.attn_fraction, self.bw * bandwidth_fraction
        fa, fb = self.attn_flops_per_pair / pa, self.growing_read_bytes / b
        # decode attention bandwidth-bound at every length, with a margin no rounding can cross
        self._bw_bound = not self.window_terms and fa < fb * (1 - 1e-9)
        self._init_moe(model, tp, ep, grouped_gemm_half_tokens, moe_config, mxfp4_moe)

    def _init_weights(self, model: ModelSpec, tp: int, weights_bytes: float | None, ep: int = 1) -> None:
        """Weight bytes each step reads (dense, experts, tied head) and matmul FLOPs per token."""
        w_total, _ = weight_bytes_per_gpu(model, tp, include_rope_cache=False, ep=ep)
        q, db = model.quant, model.dtype_bytes
        # measured / computed weight memory (the engine's figure includes the RoPE cache)
        scale = 1.0 if weights_bytes is None else weights_bytes / weight_bytes_per_gpu(model, tp, ep=ep)[0]
        emb = sum(q.bytes_of(w, db) for w in model.weights if "embed" in w.path) / tp
        self.expert_bytes = expert_bytes_per_gpu(model, tp, ep, scale)
        # embedding rows read are negligible; a tied LM head reads the whole embedding matrix (vocab-parallel: /tp)
        head = sum(q.bytes_of(w, db) for w in model.weights if w.path.endswith("embed_tokens.weight")) / tp \
            if model.tie_word_embeddings else 0.0
        self.head_bytes = scale * head
        self.dense_weight_bytes = scale * (w_total - emb) - self.expert_bytes + self.head_bytes

    def _init_allreduce(self, model: ModelSpec, gpu: GpuSpec, tp: int, latency_s: float | None, nodes: int = 1,
                        nic_Bps: float | None = None) -> None:
        """Two all-reduces per decoder layer at TP > 1 (tp_comm.py), each with the per-call latency; a TP group over
        several nodes at NCCL's ring over their NICs (tp_network.py: ``allreduce_span``, None within a node)."""
        self.num_allreduce_layers = model.num_layers if tp > 1 else 0
        self.link_bytes_per_s, self.allreduce_latency_s, self.allreduce_span = allreduce_terms(
            gpu, tp, nodes, self.allreduce_link_share, latency_s, nic_Bps)

    def allreduce_s(self, num_tokens: float) -> float:
        """TP all-reduce time of a step over ``num_tokens`` tokens (tp_comm.py), s."""
        if not self.num_allreduce_layers:
            return 0.0
        return allreduce_step_s(num_tokens, self.model.hidden_size, self.num_allreduce_layers, self.tp,
                                self.allreduce_latency_s, self.link_bytes_per_s,
                                custom_max_bytes=self.custom_allreduce_max_bytes)

    def experts_touched_fraction(self, num_tokens: float) -> float:
        """Share of each MoE layer's experts that ``num_tokens`` tokens touch (uniform top-k routing), 0–1."""
        if not (m := self.model).is_moe or num_tokens <= 0:
            return 0.0 if m.is_moe else 1.0
        return moe_terms.touched_fraction(num_tokens, m.experts_per_token, m.num_experts)

    def weight_read_bytes(self, num_tokens: float) -> float:
        """Weight bytes a step over ``num_tokens`` tokens reads from HBM, B."""
        return self.dense_weight_bytes + self.expert_bytes * self.experts_touched_fraction(num_tokens)

    def costs(self, shape: StepShape) -> StepCosts:
        """FLOPs and bytes of a step of the given aggregate shape, per GPU."""
        T, seqs = shape.num_tokens, shape.num_seqs
        pf_pairs, dec_pairs = shape.prefill_attn_pairs, shape.decode_kv_tokens
        context = shape.prefill_kv_tokens - shape.num_prefill_tokens  # cached tokens before the prefill chunks
        matmul = 2 * self.matmul_params * T + self.head_flops_per_seq * seqs + self.upproj_flops_per_token * context
        pairs = pf_pairs + dec_pairs
        pf_attn = self.prefill_flops_per_pair * pf_pairs
        attn = pf_attn + self.attn_flops_per_pair * dec_pairs
        kv_tokens = shape.decode_kv_tokens + shape.prefill_kv_tokens
        g, st = self.growing_read_bytes, 2 * self.state_bytes
        kv_bytes = g * kv_tokens + st * seqs
        pf_kv = g * shape.prefill_kv_tokens + st * shape.num_prefill_seqs
        for coef, bpt, window in self.window_terms:  # each query sees at most `window` keys
            pf_attn += coef * min(pf_pairs, window * shape.num_prefill_tokens)
            pf_kv += bpt * min(shape.prefill_kv_tokens, window * shape.num_prefill_seqs)
            if self.split_attention:
                attn += coef * (min(pf_pairs, window * shape.num_prefill_tokens) + min(dec_pairs,
                                                                                       window * shape.num_decode_seqs))
                kv_bytes += bpt * (min(shape.prefill_kv_tokens, window * shape.num_prefill_seqs)
                                   + min(shape.decode_kv_tokens, window * shape.num_decode_seqs))
            else:
                attn += coef * min(pairs, window * T)
                kv_bytes += bpt * min(kv_tokens, window * seqs)
        host = self.host_s(seqs)
        if not self._moe_terms:
            return StepCosts(matmul, attn, self.weight_read_bytes(T), kv_bytes, pf_attn, pf_kv, self.allreduce_s(T),
                             host_s=host, matmul_efficiency=self.matmul_efficiency(T),
                             layer_kernels_s=self.layer_kernels_s(T))
        m, ef = self.model, 2 * self.expert_params_per_token * T
        imb = ep_imbalance(T, m.experts_per_token, self.ep, m.num_experts)
        a2a = ep_all_to_all_bytes(T, m.experts_per_token, m.hidden_size, m.dtype_bytes, self.ep)
        a2a_s = a2a / self._a2a_link_Bps if self._a2a_link_Bps else 0.0
        if self.moe_layers:  # the fused-MoE kernel term (moe_kernel.py) prices the routed experts
            return StepCosts(matmul, attn, self.weight_read_bytes(T), kv_bytes, pf_attn, pf_kv, self.allreduce_s(T),
                             ef, imb, a2a_s, host, expert_bytes=self.expert_bytes * self.experts_touched_fraction(T),
                             moe_kernel_s=self.moe_kernel_s(T), layer_kernels_s=self.layer_kernels_s(T))
        eta = grouped_gemm_efficiency(tokens_per_expert(T, m.experts_per_token, m.num_experts),
                                      self.grouped_gemm_half_tokens)
        return StepCosts(matmul, attn, self.weight_read_bytes(T), kv_bytes, pf_attn, pf_kv, self.allreduce_s(T),
                         ef, imb / eta if eta > 0 else float("inf"), a2a_s, host,
                         layer_kernels_s=self.layer_kernels_s(T))

    def host_s(self, num_seqs: float) -> float:
        """Host time in series with the GPU of a step over ``num_seqs`` sequences, s (0.0 when neither term is set)."""
        return self.host_step_s + self.host_seq_s * num_seqs if self.host_step_s or self.host_seq_s else 0.0

    def attention_s(self, c: StepCosts) -> float:
        """The attention term at the achievable fractions and the attention dtype's peak, s: one roofline over
        prefill and decode attention, or (split-kernel backends) the two added."""
        pa, b = self.attn_peak_flops * self.attn_fraction, self.bw * self.bandwidth_fraction
        if not self.split_attention:
            return max(c.attn_flops / pa, c.kv_bytes / b)
        return (max(c.prefill_attn_flops / pa, c.prefill_kv_bytes / b)
                + max((c.attn_flops - c.prefill_attn_flops) / pa, (c.kv_bytes - c.prefill_kv_bytes) / b))

    def time_s(self, c: StepCosts, *, achievable: bool = True) -> float:
        """Step time, s.

        ``achievable=False``: the roofline lower bound of the whole step, max(FLOPs / peak, bytes / bandwidth)
        (matmuls at the weight dtype's peak, attention at the attention dtype's), plus the all-reduces.
        ``achievable=True``: the weight matmuls, the attention and the all-reduces run one after the other,
        each matmul and attention term on its own roofline at the achievable fractions, plus the CPU overhead
        (or, with ``overlap_cpu``, the larger of the two) — the step cost
        ``max(weight FLOPs/peak, weight bytes/BW) + attention (max(FLOPs/peak, KV bytes/BW)) + overhead``,
        which stops a compute-bound GEMM term from hiding the KV reads at large batch.
        """
        if not achievable:
            return max(c.matmul_flops / self.peak_flops + c.attn_flops / self.attn_peak_flops,
                       c.bytes / self.bw) + c.allreduce_s
        p, b = self.peak_flops * self.flops_fraction, self.bw * self.bandwidth_fraction
        pe = self.expert_peak_flops * self.flops_fraction  # routed experts apart only at another MMA dtype
        gpu = max(*c.weight_terms_s(p, pe, b))  # GEMMs; + the measured layer kernels and the fused MoE
        gpu = gpu + c.layer_kernels_s if c.layer_kernels_s else gpu
        if c.moe_kernel_s:
            gpu = gpu + c.moe_kernel_s
        gpu = gpu + self.attention_s(c) + c.allreduce_s + c.all_to_all_s
        if c.host_s:
            gpu = gpu + c.host_s
        return max(gpu, self.cpu_overhead_s) if self.overlap_cpu else gpu + self.cpu_overhead_s

    def step_time_s(self, shape: StepShape) -> float:
        """``time_s(costs(shape))``, s; without windowed layers or split attention kernels computed in place (the same
        operations in the same order, so bit for bit the same float, without building ``StepCosts``)."""
        if self.window_terms or self.split_attention or self._moe_terms:
            if shape.num_prefill_tokens + shape.num_decode_seqs == 0:
                return 0.0
            return self.time_s(self.costs(shape))
        return self.step_time_of(shape.num_prefill_tokens, shape.num_prefill_seqs, shape.prefill_kv_tokens,
                                 shape.prefill_attn_pairs, shape.num_decode_seqs, shape.decode_kv_tokens)

    def step_time_of(self, num_prefill_tokens: int, num_prefill_seqs: int, prefill_kv_tokens: int,
                     prefill_attn_pairs: float, num_decode_seqs: int, decode_kv_tokens: int) -> float:
        """``step_time_s`` of the StepShape with these fields, s (the simulator's hot path prices a step without
        building one)."""
        T = num_prefill_tokens + num_decode_seqs
        if T == 0:
            return 0.0
        k = self._step_consts
        if k is None:
            k = self._step_consts = self.step_consts()
        if not k:  # windowed layers, split attention kernels or MoE terms
            return self.time_s(self.costs(StepShape(num_prefill_tokens, num_prefill_seqs, prefill_kv_tokens,
                                                    prefill_attn_pairs, num_decode_seqs, decode_kv_tokens)))
        mm2, head, up, pre, att, grb, st2, pk, pa, b, overlap, cpu = k
        seqs = num_prefill_seqs + num_decode_seqs
        matmul = mm2 * T + head * seqs + up * (prefill_kv_tokens - num_prefill_tokens)
        attn = pre * prefill_attn_pairs + att * decode_kv_tokens
        kv_bytes = grb * (decode_kv_tokens + prefill_kv_tokens) + st2 * seqs
        c = self._token_terms.get(T) or self.token_terms(T)  # (weight B, all-reduce s, efficiency, kernels s), cached
        x = matmul / pk
        if c[2] != 1.0:  # the measured GEMM curve, as time_s divides by it (flat: no operation at all)
            x = x / c[2]
        gpu = max(x, c[0] / b)  # + the measured layer kernels, as time_s adds them
        gpu = (gpu + c[3] if c[3] else gpu) + max(attn / pa, kv_bytes / b) + c[1]
        if self.host_step_s or self.host_seq_s:  # as time_s adds costs().host_s (0.0 + all-to-all is exact)
            gpu = gpu + self.host_s(seqs)
        return max(gpu, cpu) if overlap else gpu + cpu
