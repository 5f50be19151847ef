"""Pure-decode step prices of the roofline, many steps at a time: what the simulator's fast paths add up.

Mixed into ``RooflineStepCost`` (roofline.py), whose attributes they read. A pure-decode step of ``n``
sequences reading ``kv`` KV tokens costs ``gemm(n) + max(attention FLOPs / peak, KV bytes / bandwidth)``
(+ all-reduce, + CPU overhead), the same float operations in the same order as ``step_time_s``, so the
fast paths' prices equal a step priced alone bit for bit (tests/dynamics/test_decode_times.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DecodePrices", "PLAIN_FLOAT_MAX_STEPS"]

PLAIN_FLOAT_MAX_STEPS = 96  # runs of decode steps this short are priced in Python floats (numpy is faster past ~100)


class DecodePrices:
    """``step_consts``, ``token_terms``, ``_gemm_s``, ``decode_plain_terms``, ``decode_steps_list`` and
    ``decode_steps_s`` of a roofline step-cost model."""

    _step_consts: tuple | bool | None = None  # step_consts(), kept at the first step priced
    _float_consts: tuple | None = ()  # float_step_consts(), kept at the first call (): not asked yet

    def step_consts(self) -> tuple | bool:
        """The constants of ``step_time_of``'s plain form, each the float the full expression computes (2 × matmul
        params, head FLOPs per sequence, up-projection FLOPs per token, prefill and decode attention FLOPs per pair, KV
        bytes per token, 2 × state bytes, peak FLOP/s × fraction for the matmuls and for attention, bandwidth ×
        fraction, CPU overlap, CPU overhead s); False where windowed layers, split attention kernels or MoE terms
        price a step through ``costs``. The measured GEMM curve's efficiency is a token term (``token_terms``);
        attention's fraction is ``attn_fraction`` (the FLOP fraction itself without a curve: the same float)."""
        if self.window_terms or self.split_attention or self._moe_terms:
            return False
        ff = self.flops_fraction
        return (2 * self.matmul_params, self.head_flops_per_seq, self.upproj_flops_per_token,
                # bytes are whole ints where the KV ledger's are (int bytes per token); the core reads floats
                self.prefill_flops_per_pair, self.attn_flops_per_pair, float(self.growing_read_bytes),
                float(2 * self.state_bytes),
                self.peak_flops * ff, self.attn_peak_flops * self.attn_fraction, self.bw * self.bandwidth_fraction,
                self.overlap_cpu, self.cpu_overhead_s)

    def float_step_consts(self) -> tuple | None:
        """``step_consts()`` where every constant but the CPU overlap (a bool) is a float, as the simulator's compiled
        core reads them, else None; kept at the first call, as ``step_time_of`` keeps its tuple (the core asks at every
        arrival stretch, open_native.py, where building and checking it anew cost ~5 µs)."""
        k = self._float_consts
        if k == ():
            k = self._step_consts if self._step_consts is not None else self.step_consts()
            k = self._float_consts = k if k and all(type(x) is float for x in k[:10] + k[11:]) else None
        return k

    def token_terms(self, num_tokens: int) -> tuple[float, float, float, float]:
        """(weight bytes read, all-reduce s, the weight GEMMs' measured efficiency — 1.0 flat, the layer kernels' s —
        0.0 flat) of a step over ``num_tokens`` tokens, cached: ``step_time_of``'s token terms (the simulator's compiled
        core prices a step's plain form with them)."""
        c = self._token_terms.get(num_tokens)
        if c is None:
            c = (self.weight_read_bytes(num_tokens), self.allreduce_s(num_tokens),
                 self.matmul_efficiency(num_tokens), self.layer_kernels_s(num_tokens))
            if len(self._token_terms) < 65536:
                self._token_terms[num_tokens] = c
        return c

    def _gemm_s(self, num_seqs: int) -> float:
        """Weight-matmul term of a pure-decode step of ``num_seqs`` sequences with the layer kernels after it, s
        (cached; as ``costs``/``time_s`` compute it, bit for bit)."""
        t = self._gemm_cache.get(num_seqs)
        if t is None:
            n = num_seqs
            p, b = self.peak_flops * self.flops_fraction, self.bw * self.bandwidth_fraction
            matmul = 2 * self.matmul_params * n + self.head_flops_per_seq * n + self.upproj_flops_per_token * 0
            e = self.matmul_efficiency(n)
            t = max(matmul / p / e if e != 1.0 else matmul / p, self.weight_read_bytes(n) / b)
            k = self.layer_kernels_s(n)
            if k:  # the measured layer kernels, added after the matmuls as time_s adds them
                t = t + k
            if len(self._gemm_cache) < 4096:
                self._gemm_cache[num_seqs] = t
        return t

    def _list_terms(self, n: int) -> tuple:
        """Per batch size ``n`` (cached): gemm s, 2 × state bytes, all-reduce s, whether the price is in its plain form
        (no state, all-reduce, host or CPU term), KV bytes per token, bandwidth B/s and host s."""
        c = self._list_consts.get(n)
        if c is None:
            gemm, st, ar, host = self._gemm_s(n), 2 * self.state_bytes * n, self.allreduce_s(n), self.host_s(n)
            c = (gemm, st, ar, not st and not ar and not host and not self.cpu_overhead_s and gemm > 0,
                 self.growing_read_bytes, self.bw * self.bandwidth_fraction, host)
            if len(self._list_consts) < 4096:
                self._list_consts[n] = c
        return c

    def decode_plain_terms(self, num_seqs: int) -> tuple[float, float, float] | None:
        """``(gemm s, KV bytes per token, bandwidth B/s)`` when every pure-decode step of ``num_seqs`` sequences costs
        ``gemm + bytes_per_token · kv_tokens / bandwidth`` as ``decode_steps_list`` computes it (bandwidth-bound
        attention,
        no state, all-reduce or CPU term); None otherwise (then ask ``decode_steps_list``)."""
        if num_seqs == 0 or not self._bw_bound or self._moe_terms:
            return None
        c = self._list_terms(num_seqs)
        return (c[0], c[4], c[5]) if c[3] else None

    def decode_steps_list(self, num_seqs: int, kv_tokens: int, num_steps: int) -> list[float]:
        """``decode_steps_s`` as a list of Python floats (what the fast path adds up), s.

        Short runs of bandwidth-bound steps are priced in plain floats, the same operations in the
        same order as ``decode_steps_s`` and ``step_time_s`` (numpy rounds each elementwise operation
        as Python does; adding a zero state, all-reduce or CPU term is skipped, as it changes no
        positive float, and so is the CPU floor of 0 s under overlap); anything else is
        ``decode_steps_s(...).tolist()`` (numpy is faster past about a hundred steps).
        """
        if num_steps > PLAIN_FLOAT_MAX_STEPS or not self._bw_bound or num_seqs == 0 or self._moe_terms:
            return self.decode_steps_s(num_seqs, kv_tokens, num_steps).tolist()
        n = num_seqs
        gemm, st, ar, plain, g, b, host = self._list_terms(n)
        if plain:
            return [gemm + g * x / b for x in range(kv_tokens, kv_tokens + n * num_steps, n)]
        cpu = self.cpu_overhead_s
        kvs = range(kv_tokens, kv_tokens + n * num_steps, n)
        if host:  # time_s's order: GPU terms, then the host's, then the CPU overhead
            gpus = [gemm + (g * k + st) / b + ar + host for k in kvs]
            return [x if x > cpu else cpu for x in gpus] if self.overlap_cpu else [x + cpu for x in gpus]
        if self.overlap_cpu:
            return [x if (x := gemm + (g * k + st) / b + ar) > cpu else cpu for k in kvs]
        return [gemm + (g * k + st) / b + ar + cpu for k in kvs]

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        """Vectorised pure-decode steps (see StepCostModel), s, shape (num_steps,).

        Bit for bit what ``step_time_s`` gives each step: the same float operations in the same
        order, elementwise (numpy rounds each as Python does), so the simulator's fast path and
        step-by-step execution agree exactly.
        """
        import numpy as np  # here: plan, which prices no stretch, does not import numpy

        if num_seqs == 0:
            return np.zeros(num_steps)
        if self._moe_terms:  # imbalance and small-GEMM terms (moe_terms.py): priced step by step, as step_time_s does
            from kvledger.accounting.stepcost import decode_steps_by_loop

            return decode_steps_by_loop(self, num_seqs, kv_tokens, num_steps)
        n = num_seqs
        pa, b = self.attn_peak_flops * self.attn_fraction, self.bw * self.bandwidth_fraction
        gemm = self._gemm_s(n)
        g, st, ar, cpu = self.growing_read_bytes, 2 * self.state_bytes * n, self.allreduce_s(n), self.cpu_overhead_s
        host = self.host_s(n)
        if self._bw_bound and not self.overlap_cpu and num_steps <= 16:  # a short run: plain floats, same operations
            out = np.empty(num_steps)
            for i in range(num_steps):
                x = gemm + (g * (kv_tokens + n * i) + st) / b + ar
                out[i] = (x + host if host else x) + cpu
            return out
        kvt = np.arange(kv_tokens, kv_tokens + n * num_steps, n)  # exact integers: kv_tokens + n·i
        byts = g * kvt
        if st:
            byts = byts + st
        if self._bw_bound:  # FLOPs/peak < bytes/bandwidth at every length: max() picks the bytes term
            term = byts / b
        else:
            flops = self.attn_flops_per_pair * kvt
            for coef, bpt, window in self.window_terms:
                capped = np.minimum(kvt, window * n)
                flops = flops + coef * capped
                byts = byts + bpt * capped
            term = np.maximum(flops / pa, byts / b)
        gpu = gemm + term
        if ar:  # x + 0.0 is x: skip the no-op adds
            gpu = gpu + ar
        if host:
            gpu = gpu + host
        if self.overlap_cpu:
            return np.maximum(gpu, cpu)
        return gpu + cpu if cpu else gpu

