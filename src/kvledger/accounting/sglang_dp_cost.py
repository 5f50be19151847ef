"""The step time of SGLang's DP attention (``--enable-dp-attention --dp-size N``, attention TP 1: N = ``--tp``)
stepping together: each DP rank's own attention on its own batch, every MLP layer over the tokens of all ranks.

What SGLang 0.5.23 does (read in the wheel, ``sglang/srt/``):

* ``managers/scheduler_components/dp_attn.py :: prepare_mlp_sync_batch_raw``: before each forward every DP rank's
  scheduler all-gathers the ranks' token counts (``MLPSyncBatchInfo.all_gather``); while any rank has tokens
  (``need_idle_batch = max(global_num_tokens) > 0``) a rank with nothing scheduled runs ``get_idle_batch`` (a
  ``ForwardMode.IDLE`` batch of 0 tokens) so that the MLP collectives line up: the ranks step in lock-step, as vLLM's
  (``dp_lockstep_cost.py``), an idle rank adding 0 tokens (vLLM's dummy batch adds 1).
* ``utils/common.py :: require_mlp_tp_gather`` is true under DP attention with ``moe_dense_tp_size`` unset (the
  default), whatever the all-to-all backend: every MLP layer's input is gathered from all DP ranks. With
  ``--moe-a2a-backend none`` (the default) that holds for the MoE layers too; ``layers/dp_attention.py``
  ``DpPaddingMode.get_dp_padding_mode`` picks per step: SUM_LEN while any rank extends (prefill in the batch);
  in a decode step SUM_LEN while the summed buffer fits the custom all-reduce with no rank idle
  (``_decode_sum_len_fits_custom_all_reduce``), else MAX_LEN where ``2 × sum ≥ max × N``, else SUM_LEN. MAX_LEN pads
  each rank to the largest count and runs ``tp_group.all_gather_into_tensor`` (``_dp_gather_via_all_gather``), then
  after the layer ``dp_reduce_scatter_tensor`` (``layer_boundary/exit.py :: _select_dp_reduce_scatter``); SUM_LEN
  all-reduces a zero buffer of the summed count (``_dp_gather_via_all_reduce``) and, after the layer, all-reduces its
  output and keeps its own rows (``dp_scatter``). The MoE kernel runs over the gathered rows: N × max (MAX_LEN) or the
  sum (SUM_LEN).
* ``--moe-a2a-backend deepep``: the MoE layers keep each rank's own tokens and DeepEP dispatches each to its top-k
  experts' ranks and combines it back (``token_dispatcher/deepep.py``); the dense MLP layers (``num_layers`` − the
  MoE layers: DeepSeek-V3's first 3) are still gathered, at SUM_LEN or MAX_LEN as above (the custom-all-reduce rule
  does not apply: it needs backend none).

Priced here: rank r's step is its own step's roofline (``inner``: attention whole per rank, attention TP 1) with the
fused-MoE term of the busiest GPU (EP N) over the gathered rows, plus per gathered layer two collectives over the N
ranks of 16-bit hidden states: MAX_LEN an all-gather and a reduce-scatter, each (N − 1) × max tokens received at NCCL's
ring all-gather latency (``tp_network.gather_latency_s``); SUM_LEN two all-reduces of the summed buffer, a ring moving
2(N − 1)/N of it at the all-reduce's fitted latency (``tp_comm``). DeepEP's dispatch and combine per MoE layer: the
busier of what rank r sends (its tokens × k × (N − 1)/N) and receives (the other ranks' tokens × k/N: uniform
routing, no de-duplication of a token's experts on one rank), 16-bit both ways, over the one-node link, each call at
the ring all-gather's latency (DeepEP's own kernel latency is not fitted: a stand-in).

The decode CUDA graphs under DP attention (``model_executor/runner/decode_cuda_graph_runner.py``, 0.5.23): with
``require_mlp_tp_gather`` a rank's graph batch is ``_pad_to_bucket(_max_dp_batch_size)``, the smallest captured size
≥ the largest rank's request count (``original_global_num_tokens_cpu``), the same on every rank, an idle rank's IDLE
batch included (``ForwardMode.is_cuda_graph`` holds for IDLE); the graph's ``global_num_tokens`` is that size on every
rank (``_global_num_tokens_for_graph``), its padding mode ``DpPaddingMode.get_default_mode_in_cuda_graph`` (SUM_LEN
where the summed buffer fits the custom all-reduce, else MAX_LEN: ``padding_mode`` of equal counts says the same). The
graph runs only when every rank decodes or idles (``dp_attn.py :: _local_decode_cuda_graph_vote``, min-reduced) and
that count is within the largest captured size (``can_run_graph``); otherwise every rank runs eagerly, unpadded.
Priced so (``graph_padded``): in such a step every rank's shape is the padded batch, each padding row attending
``SGLANG_SEQ_LEN_FILL`` KV token, as ``sglang_steps.GraphPaddedStepCost`` pads a single engine's decode. The sizes are
the plan's (``sglang_steps.sglang_capture_sizes``: the server's ``--tp`` sets ``cuda_graph_max_bs``'s default, the
rank's request pool cuts the list).

Not modelled: DeepEP's low-latency decode kernels and FP8 dispatch, the dense MLP layers' and LM head's TP split
over the gathered tokens (priced on the rank's own tokens at TP 1), two-batch overlap.
"""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting.dp_lockstep_cost import DUMMY_BATCH, LockstepStepCost
from kvledger.accounting.sglang_steps import SGLANG_SEQ_LEN_FILL, padded_decode_batch
from kvledger.accounting.stepcost import StepShape

__all__ = ["SglangDpStepCost", "padding_mode"]

_ACT_BYTES = 2  # the hidden states gathered and dispatched: 16-bit activations, B per element


def padding_mode(tokens: list[int], extend: bool, backend: str, hidden_size: int, ca_max_bytes: int) -> str:
    """SGLang 0.5.23's ``DpPaddingMode.get_dp_padding_mode`` for one step (module docstring): "sum_len" or "max_len".
    ``tokens``: each rank's count; ``extend``: a rank prefills; ``ca_max_bytes``: the custom all-reduce's bound, B."""
    n, top, total = len(tokens), max(tokens), sum(tokens)
    if extend and n > 1:
        return "sum_len"
    if n > 1 and min(tokens) > 0 and backend == "none" and total * hidden_size * _ACT_BYTES <= ca_max_bytes:
        return "sum_len"  # _decode_sum_len_fits_custom_all_reduce
    return "max_len" if total * 2 >= top * n else "sum_len"


class SglangDpStepCost(LockstepStepCost):
    """Prices one lock-step step of SGLang's ``dp`` DP-attention ranks from their StepShapes (None: an idle rank).

    Args:
        inner: the roofline of one rank at attention TP 1 with EP ``dp`` (``sim_sglang_dp.sglang_dp_cost``).
        dp: DP ranks (= ``--tp``), count. backend: ``--moe-a2a-backend``, "none" or "deepep".
        ca_max_bytes: SGLang's custom all-reduce bound over the ``dp`` GPUs, B (``sglang_custom_ar_max_bytes``).
        capture_sizes: the decode CUDA-graph batch sizes a rank captured, ascending, requests (empty: no graphs).
    """

    def __init__(self, inner, dp: int, backend: str, ca_max_bytes: int, capture_sizes: tuple[int, ...] = ()) -> None:
        super().__init__(inner, dp, None, 1)
        self.backend, self.ca_max_bytes, self.capture_sizes = backend, ca_max_bytes, tuple(capture_sizes)
        self.dense_layers = inner.model.num_layers - self.moe_layers
        self.topk = inner.model.experts_per_token

    @property
    def tp_groups(self) -> int:
        """SGLang's DP attention runs its ranks inside the one --tp group (DP N × attention TP 1 = N GPUs): 1."""
        return 1

    def layout_text(self, tp: int) -> str:
        """``DP attention 8 in TP 8`` (attention TP 1 a rank)."""
        return f"DP attention {self.dp} in TP {tp}"

    def rank_tokens(self, shapes: list) -> tuple[list[int], int, bool]:
        """(each rank's own tokens: 0 for an idle rank's IDLE batch, the rows a gathered MLP layer runs over, whether
        MAX_LEN padding applied)."""
        own = [0 if s is None else s.num_tokens for s in shapes]
        extend = any(s is not None and s.num_prefill_tokens > 0 for s in shapes)
        mode = padding_mode(own, extend, self.backend, self.hidden_size, self.ca_max_bytes)
        return own, (max(own) * len(own) if mode == "max_len" else sum(own)), mode == "max_len"

    def gathered_layer_s(self, own: list[int], padded: bool) -> float:
        """One gathered MLP layer's two collectives, s (the same on every rank: module docstring)."""
        n, row_bytes = len(own), self.hidden_size * _ACT_BYTES
        if padded:  # all_gather_into_tensor, then reduce_scatter_tensor: (N − 1) × max rows received each
            return 2 * (self.gather_latency_s + (n - 1) * max(own) * row_bytes / self.link_Bps)
        ring = 2 * (n - 1) / n * sum(own) * row_bytes  # an all-reduce of the summed buffer, twice
        return 2 * (self.call_latency_s + ring / self.link_Bps)

    def deepep_layer_s(self, own: list[int], r: int) -> float:
        """Rank ``r``'s DeepEP dispatch and combine in one MoE layer, s (module docstring)."""
        n, row_bytes = len(own), self.hidden_size * _ACT_BYTES
        sent = own[r] * self.topk * (n - 1) / n
        received = (sum(own) - own[r]) * self.topk / n
        return 2 * (self.gather_latency_s + max(sent, received) * row_bytes / self.link_Bps)

    def comm_s(self, own: list[int], padded: bool) -> list[float]:
        """Each rank's MLP-layer communication over the step, s."""
        gathered = self.gathered_layer_s(own, padded)
        if self.backend == "none":
            return [(self.moe_layers + self.dense_layers) * gathered] * len(own)
        return [self.dense_layers * gathered + self.moe_layers * self.deepep_layer_s(own, r) for r in range(len(own))]

    def graph_padded(self, shapes: list) -> list:
        """The ranks' shapes as the decode CUDA graph runs them (module docstring): where no rank prefills and the
        largest rank's decode count m is within the largest captured size, every rank (an idle one too) at the
        smallest captured size p ≥ m, each padding row attending ``SGLANG_SEQ_LEN_FILL`` KV token; else as given."""
        sizes = self.capture_sizes
        if not sizes or any(s is not None and s.num_prefill_tokens > 0 for s in shapes):
            return shapes
        top = max((s.num_decode_seqs for s in shapes if s is not None), default=0)
        if top == 0 or top > sizes[-1]:
            return shapes
        p = padded_decode_batch(top, sizes)
        return [StepShape(num_decode_seqs=p, decode_kv_tokens=p * SGLANG_SEQ_LEN_FILL) if s is None else
                replace(s, num_decode_seqs=p, decode_kv_tokens=s.decode_kv_tokens
                        + (p - s.num_decode_seqs) * SGLANG_SEQ_LEN_FILL) for s in shapes]

    def rank_times_s(self, shapes: list) -> list[float]:
        """Each rank's step time, s: its own step's roofline (an idle rank's: the one-token dummy shape, its
        attention and dense terms; under a decode CUDA graph every rank at the padded batch, ``graph_padded``), the
        MoE term over the rows the MoE layers run, and the communication."""
        shapes = self.graph_padded(shapes)
        own, rows, padded = self.rank_tokens(shapes)
        moe_rows = rows if self.backend == "none" else sum(own)  # DeepEP: each token once, at its experts' ranks
        moe = self.moe_s(max(1, moe_rows))
        out = []
        for shape, comm in zip(shapes, self.comm_s(own, padded)):
            c = self.inner.costs(DUMMY_BATCH if shape is None else shape)
            out.append(self.inner.time_s(replace(c, moe_kernel_s=moe, all_to_all_s=comm)))
        return out
