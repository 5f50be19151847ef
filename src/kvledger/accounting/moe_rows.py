"""The fused-MoE GEMM rows of one MoE layer on the busiest GPU: an expert's rows after ``moe_align_block_size`` pads its
token count to the block (mean and variance), and under expert parallelism the busiest rank's padded rows.

* One expert: a step over T tokens under uniform top-k routing gives an expert c ~ Binomial(T, k/E) tokens (each token
  picks k distinct experts); ``moe_align_block_size`` pads c up to a multiple of B = BLOCK_SIZE_M, P = ⌈c/B⌉·B rows.
  Mean and variance of P exactly, over the pmf within mean ± 12 σ (the rest is below 1e-30).
* A rank under expert parallelism over g ranks holds n₀ = ⌈E/g⌉ whole experts (vLLM's linear placement; r = E mod g
  ranks hold that many, all g when g divides E). Its rows are the sum of its n₀ experts' P: mean n₀·E[P], variance
  n₀·Var[P]·(E − n₀)/(E − 1) — the finite-population correction of n₀ experts drawn from E, exact for the
  pair count of one token (hypergeometric) and ≈ for padded rows. The step waits for the busiest of the r fullest
  ranks: ≈ mean + σ·√(2 ln r) (Gaussian extreme value), capped at what a rank can physically hold: each expert at
  most B·⌈c_max/B⌉ rows, c_max the largest count with real probability (P(C > c_max) ≤ 1e-9, never above T), and
  no more blocks than the rank's T·min(k, n₀) pairs can fill. The Gaussian alone overshoots that (DeepSeek-V3 on EP
  8 at T = 100: 2,101 rows where 32 experts × one 64-row block is 2,048) and falls where a count's pmf settles inside
  one block (Var[P] shrinks); the true busiest rank never gets fewer rows from more tokens (add a token: no count
  falls), so the rows at T are the running maximum of the capped Gaussian over T' ≤ T, tabled up to 16,384 tokens
  (past that, Var[P] ≈ Var[c] + B²/12, uniform padding, which grows with T). Without expert parallelism every GPU
  holds 1/TP of every expert: the E experts' mean rows, no imbalance.

The busiest rank's rows per local expert m_b set both the GEMM FLOPs (2 · the rank's expert weights · m_b) and the
GEMM efficiency η(m_b) of ``moe_kernel.moe_layer_s``: a rank with more rows runs its tiles fuller, so the part of the
GEMM term that does not grow with the rows (the m½ of η) is paid once, not scaled by the imbalance.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from kvledger.accounting.moe_terms import tail
from kvledger.catalog.expert_placement import local_experts

__all__ = ["block_m", "marlin_block", "ogs_block", "expert_kernel", "OGS_RAGGED_VLLM", "tuned_block",
           "padded_rows_moments", "busiest_rank_rows", "tail", "largest_count", "rank_rows_cap", "COUNT_TAIL",
           "ENVELOPE_TOKENS"]

COUNT_TAIL = 1e-9  # P(C > c_max) of one expert and layer: a count rarer than this has no real probability
ENVELOPE_TOKENS = 16384  # the busiest rank's rows are tabled, T by T, up to this many tokens a step


def block_m(tokens: float, experts: int) -> int:
    """vLLM's default BLOCK_SIZE_M of the fused-MoE GEMMs for a step of ``tokens`` tokens (``get_default_config``:
    16 when M ≤ E, else 64), rows. ``experts`` is the rank's local count: vLLM 0.11.0's
    ``fused_moe.py::try_get_optimal_moe_config`` passes E = ``w2_shape[0]``, the first dimension of the layer's w2,
    which ``fused_moe/layer.py::FusedMoE.__init__`` creates with ``local_num_experts`` (``determine_expert_map``: all E
    without expert parallelism, ⌈E / EP⌉ on rank 0 with it), not ``global_num_experts``."""
    return 16 if tokens <= experts else 64


def marlin_block(tokens: float, top_k: int, experts: int) -> int:
    """BLOCK_SIZE_M of vLLM's Marlin MoE kernel (weight-only MXFP4/INT4 experts) for a step of ``tokens`` tokens: the
    first of 8, 16, 32, 48, 64 rows with tokens·k/E/B < 0.9, else 64 (vLLM 0.19 ``fused_marlin_moe.py::
    fused_marlin_moe``; 0.10.0 ``fused_moe.py::get_default_config(is_marlin=True)``; 0.33 ``experts/marlin_moe.py``),
    rows: it grows with the rows each expert gets, where Triton's default jumps from 16 to 64 past M > E."""
    for b in (8, 16, 32, 48, 64):
        if tokens * top_k / experts / b < 0.9:
            return b
    return 64


def ogs_block(tokens: float, top_k: int, experts: int, ragged: bool = False) -> int:
    """block_m of triton_kernels' ``matmul_ogs`` (the MoE GEMMs vLLM 0.10.2 on and SGLang run for MXFP4 experts on
    Hopper) for a step of ``tokens`` tokens: max(16, min(next_pow2(⌊T·k/E⌋), 128)) rows, the expected rows per expert
    rounded up to a power of two (``matmul_ogs_details/opt_flags.py :: make_default_opt_flags_nvidia`` at the triton
    3.4–3.5 tags, whose routing leaves ``expected_tokens_per_expt`` unset, so m // n_expts_tot with m = T·k gathered
    rows). Each expert's rows are padded to it (the routing's ``block_pid_map``), as ``moe_align_block_size`` pads.
    ``ragged``: the later opt_flags.py that vLLM 0.17–0.21 vendor (``OGS_RAGGED_VLLM``), which for ragged routing
    (``expt_hist`` set, as vLLM's ``legacy_routing`` sets it) and ⌊T·k/E⌋ ≤ 64 takes max(16, min(next_pow2(2·⌊T·k/E⌋),
    64)) ("likely memory bound; set the block size higher"), the rule above past 64 rows per expert."""
    per_expert = max(1, int(tokens * top_k) // experts)
    if ragged and per_expert <= 64:
        return max(16, min(1 << (2 * per_expert - 1).bit_length(), 64))
    return max(16, min(1 << (per_expert - 1).bit_length(), 128))


OGS_RAGGED_VLLM = ((0, 17, 0), (0, 21, 0))
"""The vLLM releases whose wheel vendors the later triton_kernels (``vllm/third_party/triton_kernels/
matmul_ogs_details/opt_flags.py`` with the ragged 2·⌊T·k/E⌋ rule and no ``routing.py``; read in 0.17.0, 0.18.0,
0.19.0, 0.20.0 and 0.21.0). 0.12.0–0.16.0 and 0.22.0–0.28.0 vendor the triton v3.5.0 file (``ogs_block``'s first
rule); 0.10.2–0.11 vendor none (the triton_kernels installed beside them, 3.4–3.5 as the GPT-OSS recipe had it)."""


def expert_kernel(quant: str, arch: str, mxfp4_moe: str = "") -> str:
    """The routed experts' kernel family, which sets their block: "marlin" (``marlin_block``), "ogs" or "ogs_ragged"
    (``ogs_block``), "" (Triton fused_moe, ``block_m``/``tuned_block``). vLLM 0.19's MoE oracles pick Marlin MoE for
    MXFP4 experts below Hopper (oracle/mxfp4.py: the Triton and FlashInfer backends need sm90+) and FP8 experts below
    sm89 (oracle/fp8.py: TritonExperts._supports_quant_scheme takes FP8 from sm89); MXFP4 experts on Hopper run
    triton_kernels' matmul_ogs (0.11.0 mxfp4.py :: get_mxfp4_backend, TRITON with triton_kernels installed, as the
    weights' low end takes; 0.18.0 likewise, 0.19.0's oracle with its vendored copy). ``mxfp4_moe``: a release's own
    choice for MXFP4 experts where it differs ("marlin" on Hopper before 0.10.2, "ogs_ragged" in ``OGS_RAGGED_VLLM``:
    ``plan_roofline.mxfp4_moe_kernel``; "fused" for a FlashInfer backend: fused_moe's block rule); "" the rule above."""
    if quant == "mxfp4" and mxfp4_moe:
        return "" if mxfp4_moe == "fused" else mxfp4_moe
    if (quant == "mxfp4" and arch in ("sm75", "sm80", "sm86", "sm89")) or (quant == "fp8" and arch in
                                                                          ("sm75", "sm80", "sm86")):
        return "marlin"
    return "ogs" if quant == "mxfp4" and arch == "sm90" else ""


def tuned_block(tuned: bool) -> int:
    """BLOCK_SIZE_M to price a config at: 16 rows for a tuned config, 0 (``block_m``'s default rule) otherwise.

    A tuned file's block is the fastest of those ``benchmark_moe.py --tune`` timed (16 among them) at that M: where it
    keeps a larger block (E=32,N=2048 on H200 in FP8 128-blocks: BLOCK_SIZE_M 64 from M = 64) it ran no slower than
    16, so the padding it adds costs nothing the 16-row price misses. Priced so, the tuned table among the fused-MoE
    kernel timings (Mixtral on H100) fits better: module docstring of moe_kernel.py."""
    return 16 if tuned else 0


@functools.lru_cache(maxsize=65536)
def padded_rows_moments(tokens: int, top_k: int, experts: int, local: int = 0, block: int = 0) -> tuple[float, float]:
    """(E[P], Var[P]) of one expert's padded rows P = ⌈c/B⌉·B, c ~ Binomial(tokens, k/E) (module docstring), rows and
    rows²; B = ``block``, or 0: ``block_m`` over the rank's ``local`` experts (0: all E, no expert parallelism)."""
    if tokens <= 0:
        return 0.0, 0.0
    b, p = block or block_m(tokens, local or experts), top_k / experts
    if p >= 1:
        return float(math.ceil(tokens / b) * b), 0.0
    c, pmf = _count_pmfs(np.array([tokens]), p, np.array([b]))
    mean, var = _padded_moments(c, pmf, np.array([b]))
    return float(mean[0]), float(var[0])


def largest_count(tokens: int, top_k: int, experts: int) -> int:
    """c_max: the largest token count one expert gets with real probability in a step of ``tokens`` tokens, the
    smallest c with P(C > c) ≤ ``COUNT_TAIL`` for C ~ Binomial(tokens, k/E); never above ``tokens``. Non-decreasing
    in ``tokens`` (Binomial(T + 1, p) dominates Binomial(T, p), so its quantiles are no smaller)."""
    if tokens <= 0 or top_k >= experts:
        return max(0, tokens)
    return int(_largest_counts(*_count_pmfs(np.array([tokens]), top_k / experts, np.array([0])))[0])


def _window(tokens: int, p: float, pad: int) -> tuple[int, int, float]:
    """(lo, hi, ln pmf(lo)) of Binomial(``tokens``, p), 0 < p < 1: the counts within mean ± 12 σ (and ``pad`` more
    above; the rest is below 1e-30)."""
    mu, sd = tokens * p, math.sqrt(tokens * p * (1 - p))
    lo, hi = max(0, int(mu - 12 * sd - 2)), min(tokens, int(mu + 12 * sd + 2 + pad))
    return lo, hi, (math.lgamma(tokens + 1) - math.lgamma(lo + 1) - math.lgamma(tokens - lo + 1) + lo * math.log(p)
                    + (tokens - lo) * math.log1p(-p))


def _count_pmfs(ts: np.ndarray, p: float, pads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(counts c, pmf) of Binomial(t, p) for each t of ``ts`` (≥ 1), 0 < p < 1, a row each over its ``_window``,
    normalised; a row narrower than the widest ends in its last count repeated at probability 0. One expert's count:
    a row for ``padded_rows_moments`` and ``largest_count``, a row per step's tokens for the busiest rank's table."""
    lo, hi, lp0 = (np.array(x) for x in zip(*map(_window, ts.tolist(), [p] * len(ts), pads.tolist())))
    c = lo[:, None] + np.arange(int((hi - lo).max()) + 1, dtype=np.float64)
    # ln pmf: ln pmf(lo), then the ratio pmf(j+1)/pmf(j) = (T − j)/(j + 1) · p/(1 − p) accumulated (past a row's
    # last count, where T − j may be 0 or less, a ratio of 1: masked below)
    steps = np.log(np.maximum(ts[:, None] - c[:, :-1], 1) / (c[:, :-1] + 1)) + math.log(p / (1 - p))
    logs = np.empty_like(c)
    logs[:, 0] = lp0
    logs[:, 1:] = np.cumsum(steps, axis=1) + lp0[:, None]
    pmf = np.where(c <= hi[:, None], np.exp(logs), 0.0)
    return np.minimum(c, hi[:, None]), pmf / pmf.sum(axis=1, keepdims=True)


def _padded_moments(c: np.ndarray, pmf: np.ndarray, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E[P], Var[P]) of each row of ``_count_pmfs`` padded to its block, rows and rows²."""
    rows = np.ceil(c / blocks[:, None]) * blocks[:, None]
    mean = (pmf * rows).sum(axis=1)
    return mean, np.maximum(0.0, (pmf * rows * rows).sum(axis=1) - mean * mean)


def _largest_counts(c: np.ndarray, pmf: np.ndarray) -> np.ndarray:
    """c_max of each row of ``_count_pmfs``: its smallest count c with P(C > c) ≤ ``COUNT_TAIL``."""
    beyond = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1] - pmf  # P(C > c)
    return c[np.arange(len(c)), np.argmax(beyond <= COUNT_TAIL, axis=1)]


def rank_rows_cap(tokens: int, top_k: int, experts: int, local: int, block: int) -> int:
    """The most padded rows a rank of ``local`` experts can hold in a step (module docstring), rows: each expert at
    most B·⌈c_max/B⌉, and all the pairs landing there, S = T·min(k, n₀), fill at most min(S, n₀ + ⌊(S − n₀)/B⌋)
    blocks (each block needs a pair, each expert's first block one, each further block B more)."""
    cmax = np.array([largest_count(tokens, top_k, experts)])
    return int(_caps(np.array([tokens]), cmax, top_k, local, np.array([block]))[0])


def _caps(ts: np.ndarray, cmax: np.ndarray, top_k: int, local: int, blocks: np.ndarray) -> np.ndarray:
    """``rank_rows_cap`` of each step's tokens ``ts`` with its c_max and block, rows."""
    pairs = ts * min(top_k, local)
    n_blocks = np.where(pairs <= local, pairs, local + (pairs - local) // blocks)
    return np.minimum(local * np.ceil(cmax / blocks) * blocks, n_blocks * blocks)


@functools.lru_cache(maxsize=64)
def _busiest_table(size: int, top_k: int, experts: int, ep: int, block: int) -> np.ndarray:
    """The busiest rank's padded rows for T = 0 … ``size`` tokens (module docstring): the Gaussian tail capped at
    ``rank_rows_cap``, then the running maximum over T' ≤ T, rows."""
    n0, p, r = local_experts(experts, ep), top_k / experts, tail((experts % ep) or ep)
    ts = np.arange(1, size + 1)
    blocks = np.full(size, block) if block else np.array([block_m(int(t), n0) for t in ts])
    out = np.zeros(size + 1)
    for s in range(0, size, 512):
        t, b = ts[s:s + 512], blocks[s:s + 512]
        c, pmf = _count_pmfs(t, p, b)
        (mean, var), cmax = _padded_moments(c, pmf, b), _largest_counts(c, pmf)
        sd = np.sqrt(n0 * var * (experts - n0) / (experts - 1))
        out[s + 1:s + 1 + len(t)] = np.minimum(n0 * mean + sd * r, _caps(t, cmax, top_k, n0, b))
    return np.maximum.accumulate(out)


def busiest_rank_rows(tokens: int, top_k: int, experts: int, ep: int, block: int = 0) -> float:
    """The busiest rank's padded rows per local expert, m_b (module docstring), rows; ``ep`` ≤ 1: the mean E[P].
    ``block``: BLOCK_SIZE_M, or 0 for ``block_m`` over the rank's local experts."""
    if ep <= 1:
        return padded_rows_moments(tokens, top_k, experts, 0, block)[0]
    n0 = local_experts(experts, ep)
    if n0 >= experts or tokens <= 0 or top_k >= experts:
        return padded_rows_moments(tokens, top_k, experts, n0, block)[0]
    if tokens <= ENVELOPE_TOKENS:
        size = max(1024, 1 << (tokens - 1).bit_length())
        return float(_busiest_table(size, top_k, experts, ep, block)[tokens]) / n0
    # past the table: the padding's spread as if uniform over a block (σ_c ≫ B), Var[P] ≈ Var[c] + B²/12, which
    # grows with T, held no lower than the table's last row and capped
    b, p = block or block_m(tokens, n0), top_k / experts
    sd = math.sqrt(n0 * (tokens * p * (1 - p) + b * b / 12) * (experts - n0) / (experts - 1))
    top = max(n0 * padded_rows_moments(tokens, top_k, experts, n0, block)[0] + sd * tail((experts % ep) or ep),
              float(_busiest_table(ENVELOPE_TOKENS, top_k, experts, ep, block)[-1]))
    return min(top, rank_rows_cap(tokens, top_k, experts, n0, b)) / n0
