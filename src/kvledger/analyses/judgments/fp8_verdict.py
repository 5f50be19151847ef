"""The FP8 KV analysis in plain words: the verdict sentences and the caveats, each with its numbers and sources."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.units import fmt_bytes, fmt_duration

if TYPE_CHECKING:
    from kvledger.analyses.judgments.fp8_kv import Fp8DecodeModel, Fp8Report

__all__ = ["fp8_verdict", "fp8_notes", "start_up_line", "measured_disagreements"]


#: the published measurements where FP8 KV made serving slower (``catalog/data/fp8_kv_measurements.csv`` rows)
_SLOWER = ("vllm-hopper-qwen3.5-35b-a3b-e2e", "llm-scaler-arc-b50-qwen3.8-27b-decode")


def _row(name: str) -> str:
    """A published measurement as output cites it: the catalog row's name, figure and unit
    (``catalog.fp8_kv_measurements``; the row's source is in the data file)."""
    from kvledger.catalog.fp8_kv_measurements import fp8_kv_measurement

    return fp8_kv_measurement(name).citation


def _n(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def start_up_line(h: dict) -> str | None:
    """"bf16/auto: does not start (needs N blocks, has M); fp8: starts", where the 16-bit pool cannot hold one request
    of max_model_len (vLLM's start-up check) and the fp8 pool can; None where both start."""
    st = h.get("start_up") if h else None
    if not st or st["bf16"]["starts"]:
        return None
    b = st["bf16"]
    return (f"bf16/auto: does not start (needs {b['need_blocks']:,} blocks, has {b['usable_blocks']:,}); fp8: starts "
            f"(needs {st['fp8']['need_blocks']:,}, has {st['fp8']['usable_blocks']:,}) at max_model_len "
            f"{st['max_model_len']:,}")


def _start_sentence(h: dict) -> str | None:
    line = start_up_line(h)
    if line is None:
        return None
    return (f"Start-up: {line}. FP8 KV is what lets this deployment start at this max_model_len: vLLM refuses to start "
            "with the 16-bit pool, which cannot hold one request of max_model_len; keeping bf16 KV means lowering "
            "--max-model-len (or more GPUs). The capacity and speed figures below compare the two pools as if bf16 "
            "had started.")


def _capacity_sentences(r: Fp8Report) -> list[str]:
    c, n = r.capacity, r.concurrency
    b, f = c.bf16, c.fp8
    h = r.headline
    start = _start_sentence(h)
    out = [start] if start else []
    if h:
        out.append(f"At {h['context_tokens']:,} tokens per request: bf16 KV holds "
                   f"{_n(h['bf16_max_requests'], 'request')} at "
                   f"once, FP8 KV {h['fp8_max_requests']:,} (per replica, vLLM memory plan). The speed figures below "
                   f"are at "
                   f"{_n(n, 'concurrent sequence')}: {h['concurrency_basis']}.")
    out.append(_page_sentence(b, f))
    max_len = r.break_even.max_context_tokens
    cb, cf = c.bf16_max_context_tokens, c.fp8_max_context_tokens
    if h and not h.get("concurrency_given", True) and cb > 0:  # n is what bf16 holds: "bf16 holds them" says nothing
        out.append(_default_capacity_sentence(h))
    elif cb >= max_len:
        out.append(f"At {_n(n, 'concurrent request')} bf16 already holds them at max_model_len ({max_len:,} tokens "
                   f"each): "
                   "capacity is not a reason to turn FP8 on here.")
    elif cf == 0:
        out.append(
            f"Not even FP8 holds {_n(n, 'concurrent request')} of any length: lower the concurrency or add GPUs."
        )
    elif cb == 0:
        out.append(f"bf16 cannot hold {_n(n, 'concurrent request')} at all; FP8 holds them up to {cf:,} tokens each.")
    else:
        upto = "max_model_len" if cf >= max_len else f"{cf:,} tokens"
        out.append(
            f"Capacity matters from {cb + 1:,} tokens per request: at {_n(n, 'concurrent request')} bf16 holds "
            f"them up to "
            f"{cb:,} tokens each, FP8 up to {upto}. In between, FP8 is what lets {_n(n, 'request')} run at once."
        )
    return out


def _default_capacity_sentence(h: dict) -> str:
    """Without --concurrency the batch is the bf16 pool's own capacity, so whether bf16 holds it is true by
    construction: the capacity question is then what FP8 adds at the context asked (whole requests of it, per replica,
    up to max_num_seqs, which caps running requests whatever the pool holds)."""
    at, seqs = h["context_tokens"], h["max_num_seqs"]
    nb, nf = min(h["bf16_max_requests"], seqs), min(h["fp8_max_requests"], seqs)
    capped = f", max_num_seqs {seqs:,} capping running requests" if h["fp8_max_requests"] > seqs else ""
    if nf <= nb:
        return (f"Capacity at {at:,} tokens per request: FP8 KV adds no concurrent request here ({nb:,} either way"
                f"{capped}; vLLM memory plan): capacity is not a reason to turn FP8 on at this context.")
    return (f"Capacity at {at:,} tokens per request: FP8 KV raises what one replica runs at once from {nb:,} to "
            f"{nf:,} requests ({nf / nb:.2f}×{capped}; vLLM memory plan). That is a reason to turn it on where more "
            f"than {nb:,} such requests arrive together, a server that queues or preempts at that load (`kvledger "
            f"doctor` on its log says whether yours does); --concurrency N asks whether a load you know fits in bf16.")


def _page_sentence(b: dict, f: dict) -> str:
    """What FP8 KV does to the page and the pool, with the plan's own ratios: half the page and twice the pool for a
    plain element layout, less where a packed entry keeps scales (DeepSeek's fp8_ds_mla, 656 B for 576 elements), none
    where the engine stores the same cache either way (vLLM on SM120 turns ``auto`` into fp8_ds_mla too)."""
    pages = f"{fmt_bytes(b['bytes_per_block'], both=False)} → {fmt_bytes(f['bytes_per_block'], both=False)} per " \
            f"{b['block_size']}-token block"
    pool = (f"{b['num_gpu_blocks']:,} → {f['num_gpu_blocks']:,} blocks = {b['pool_tokens']:,} → {f['pool_tokens']:,} "
            "tokens")
    if b["bytes_per_block"] == f["bytes_per_block"]:
        return (f"Capacity: no change — the engine stores the same cache either way ({pages}; {pool}; vLLM memory "
                "plan: its KV notes, `kvledger plan --verbose`, say which layout), so FP8 KV is not a capacity lever "
                "here.")
    shrink, grow = b["bytes_per_block"] / f["bytes_per_block"], f["num_gpu_blocks"] / max(b["num_gpu_blocks"], 1)
    if b["block_size"] != f["block_size"]:  # fp8's own block: MLA's backend, or a hybrid page above the state's
        pages = (f"{fmt_bytes(b['bytes_per_block'], both=False)} per {b['block_size']}-token block → "
                 f"{fmt_bytes(f['bytes_per_block'], both=False)} per {f['block_size']}-token block")
        shrink = (b["bytes_per_block"] / b["block_size"]) / (f["bytes_per_block"] / f["block_size"])
        grow = f["pool_tokens"] / max(b["pool_tokens"], 1)
        return (f"Capacity: FP8 KV shrinks the page per token {shrink:.2f}× ({pages}) and grows the pool "
                f"{grow:.2f}× in token slots: {pool} (vLLM memory plan; one byte per KV element instead of "
                f"{b['elem_bytes']:g}" + ("" if abs(shrink - b["elem_bytes"]) < 0.01 else ", with the layout's own "
                                          "scales and padding")
                + "; each column at its own block size, as `kvledger plan --kv-cache-dtype fp8` plans it).")
    return (f"Capacity: FP8 KV shrinks the page {shrink:.2f}× ({pages}) and grows the pool {grow:.2f}×: {pool} "
            f"(vLLM memory plan; one byte per KV element instead of {b['elem_bytes']:g}"
            + ("" if abs(shrink - b["elem_bytes"]) < 0.01 else ", with the layout's own scales and padding") + ").")


def _speed_sentence(r: Fp8Report, dm: Fp8DecodeModel) -> str:
    be, n = r.break_even, r.concurrency
    short = min(p.context_tokens for p in r.curve)
    p_short = dm.point(n, short)
    if be.kind == "never":
        why = ("the step is compute-bound, so halving KV bytes saves no time and only the overhead is left"
               if be.regime == "compute" else "the FP8 overhead outweighs the KV bytes saved")
        return (f"Speed: at {_n(n, 'concurrent sequence')} FP8 KV never makes decode steps faster up to "
                f"{be.max_context_tokens:,} "
                f"tokens ({why}; {p_short.fp8_gain_pct:+.1f}% at {short:,} tokens). Leave it off unless you need the "
                f"capacity.")
    if be.kind == "always":
        return (f"Speed: at {_n(n, 'concurrent sequence')} FP8 KV makes decode steps faster at every context "
                f"({p_short.fp8_gain_pct:+.1f}% at {short:,} tokens, more as context grows).")
    c = be.context_tokens
    longs = [p for p in r.curve if p.context_tokens > c]
    gain = f"; {longs[-1].fp8_gain_pct:+.1f}% at {longs[-1].context_tokens:,} tokens" if longs else ""
    slow = f" ({p_short.fp8_gain_pct:+.1f}% at {short:,} tokens)" if short < c else ""
    return (f"Speed: at {_n(n, 'concurrent sequence')} the break-even is {c:,} tokens of context per sequence. Below "
            f"it FP8 KV "
            f"makes each decode step slower{slow}: leave it off there unless you need the capacity. Above it, decode "
            f"steps are faster{gain}.")


def fp8_verdict(r: Fp8Report, dm: Fp8DecodeModel) -> list[str]:
    """Capacity, speed at the asked concurrency, how the break-even moves with batch, and what it rests on; where the
    engine stores the same cache for both settings, that alone (nothing else differs)."""
    b, f = r.capacity.bf16, r.capacity.fp8
    if b["bytes_per_block"] == f["bytes_per_block"]:
        return [_page_sentence(b, f), "Speed: no change either — the same kernel reads the same cache, so neither "
                "the KV bytes saved nor the FP8 overhead this analysis prices elsewhere applies; the flag is moot "
                "here."]
    out = _capacity_sentences(r) + [_speed_sentence(r, dm)]
    table = r.break_even_by_batch
    above = [b for b in table if b.kind == "above"]
    if len(above) >= 2:
        low = min(above, key=lambda b: b.context_tokens)
        rises = [
            b
            for b in table
            if b.batch > low.batch and (b.kind == "never" or (b.context_tokens or 0) > low.context_tokens)
        ]
        falls = [b for b in above if b.batch <= low.batch]
        s = ("The break-even falls as the batch grows (the fixed per-layer overhead is shared by more KV reads): "
             + ", ".join(f"{b.context_tokens:,} tokens at batch {b.batch}" for b in falls[:5]))
        if rises:
            b = rises[0]
            s += (f"; from batch {b.batch} it rises again ("
                  + ("never faster" if b.kind == "never" else f"{b.context_tokens:,} tokens")
                  + ") because the weight matmuls turn compute-bound at short context and the KV saving stops counting")
        out.append(s + ".")
    ov = r.overhead
    rb = dm.rb
    out.append(f"This break-even is derived, not a constant: it rests on the FP8 overhead "
               f"({fmt_duration(ov.per_layer_s)} per "
               f"layer per step + {ov.ns_per_element * 1e6:.2g} ns per million K/V elements; {ov.source}) and the "
               "roofline at "
               f"{rb.bandwidth_fraction:.0%} of {rb.bw / 1e12:.2f} TB/s. The often-quoted ~7,000 tokens for 8B models "
               f"on "
               "Hopper has no source: no published measurement behind it; published measurements range from 'always "
               "faster' (vLLM docs, L4) to slower ("
               + "; ".join(_row(n) for n in _SLOWER) + ").")
    return out


def fp8_notes(r: Fp8Report, dm: Fp8DecodeModel) -> list[str]:
    """Caveats: accuracy, prefill, backends, what the model leaves out."""
    notes = ["Accuracy is not modelled: vLLM's default FP8 scales are 1.0 (uncalibrated), which the vLLM docs warn can "
             "cost accuracy; calibrate scales (llm-compressor) before relying on FP8 KV.",
             "Prefill also pays quantise-on-write, and decode may gain little: "
             f"{_row('vllm-a100-qwen3-8b-prefill')}; {_row('vllm-a100-qwen3-8b-decode')}.",
             "The gain depends on the attention backend (FlashAttention 3 quantises queries too; unfused quantisation "
             f"made FP8 slower: {_row('sglang-h200-fa3-decode')}): recalibrate the overhead with `fit_fp8_overhead` "
             "from your own bf16-vs-fp8 runs (--calibration FILE).",
             "Step times are the step cost `kvledger simulate` uses for this deployment (the roofline at its "
             "achievable fractions, with the engine's host term where one is modelled: the step cost line); the "
             "break-even depends on the KV saving's ratio to the overhead, not on their absolute accuracy."]
    if any(g.kind not in ("full", "mla", "state") for g in dm.pb.kv.groups):
        notes.append("Sliding-window / chunked layers stop growing at their window, so the closed form c* applies only "
                     "to the full-attention layers; the break-even shown is found numerically.")
    return notes


def measured_disagreements(measured, dm: Fp8DecodeModel) -> list[str]:
    """A verdict sentence where the measured bf16-vs-fp8 rows (``Fp8Measurement``, per sequence, of this model on this
    GPU) disagree with the priced steps on which is faster: there the measurements win. Empty where they agree."""
    out = []
    for m in measured or ():
        meas = 100 * (1 - m.bf16_tok_per_s / m.fp8_tok_per_s)  # (t_bf16 − t_fp8) / t_bf16, % (1 / rate = step)
        model = dm.point(m.batch, m.context_tokens).fp8_gain_pct
        if (meas > 0) != (model > 0):
            out.append(f"at {m.context_tokens:,} tokens × batch {m.batch:,} FP8 measured {_faster(meas)} "
                       f"({m.bf16_tok_per_s:,.4g} → {m.fp8_tok_per_s:,.4g} tok/s per sequence) where this analysis "
                       f"prices it {_faster(model)}")
    if not out:
        return []
    return [f"Your measurements disagree with this analysis at {len(out):,} of {len(measured):,} measured points: "
            + "; ".join(out) + ". At the contexts and batches you measured, the measurements win: go by them there, "
            "not by the break-even below, which is the fitted model's between and beyond them."]


def _faster(gain_pct: float) -> str:
    return f"{gain_pct:.1f}% faster" if gain_pct > 0 else f"{-gain_pct:.1f}% slower"
