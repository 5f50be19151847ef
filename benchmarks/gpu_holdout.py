"""Leave one GPU out: the error band of a figure on a GPU with no measured run (``kvledger.ledgers.unmeasured_gpu``).

Used by ``python benchmarks/validate_all.py --sections lodo [--write-bands] [--write-docs]`` (benchmarks/lodo_bands.py).

Every run of one GPU is held out in turn and priced as a GPU nobody measured is priced by default: the roofline with
no GPU profile (``--gpu-profile none``) and ``--gemm-efficiency carried`` — flat matmul efficiency (0.7 of peak
FLOP/s, no operator profile's GEMM curve), the layer-kernel floors carried from the other profiled GPUs only (its own
and its die's left out, in SM cycles at its boost clock) and the bandwidth share carried from its measured BabelStream
Copy (0.8 × its share of peak ÷ the H100 SXM's; 0.8 without a row): what ``kvledger.accounting.carried_kernels`` gives
a GPU without measured tables, so the band measures the pricing users on such a GPU get. Nothing else the pricing
reads was fitted on the held-out GPU's serving runs (the fused-MoE kernel term is fitted to published kernel timings,
not to these runs). A GPU without an operator profile (the RTX 4090) is priced so already: its uncalibrated errors are
reused, the pricing being the same. The public MoE figures are replayed again with both flags.

Errors (predicted/measured − 1) are those of ``lodo_bands._errors``: mean TTFT and mean TPOT below saturation,
saturation throughput. Per regime (architecture, vLLM) and metric the band is ``held_out_gpu_interval``'s: conformal
ranks with each GPU weighted once from nine GPUs and ten values; below, too few for a quantile, the widest envelope
per side of the held-out errors' range, the t interval over GPUs and the measured GPUs' own band (the regime band of
``lodo_bands.bands``). Coverage leaves each GPU out: its held-out errors against the band of the other GPUs' errors,
widened to the regime band built without that GPU's deployments.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

CARRIED = {"gemm_efficiency": "carried", "gpu_profile": "none"}
FLAGS = "--gemm-efficiency carried --gpu-profile none"
METRICS = ("ttft_mean", "tpot_mean", "throughput")


def _gpu_id(name: str) -> str:
    from kvledger.catalog.gpus import get_gpu

    return get_gpu(name).gpu_id


def _priced_alike(gpu: str) -> bool:
    """True where the default uncalibrated pricing on ``gpu`` reads nothing measured of it (no operator profile, its
    own or its die's: it carries the floors of all the profiled GPUs and its own bandwidth share): the held-out
    pricing is the same."""
    from kvledger.accounting.carried_kernels import has_measured_tables

    return not has_measured_tables(_gpu_id(gpu))


def held_out_errors(dep: dict, uncalibrated: dict[str, list[float]]) -> dict[str, list[float]]:
    """A deployment's errors priced as on an unmeasured GPU (module docstring)."""
    from lodo_bands import _errors

    if _priced_alike(dep["gpu"]):
        return {m: list(v) for m, v in uncalibrated.items()}
    return _errors({**dep, "args": replace(dep["args"], **CARRIED)}, None)


def public_held_out(rows: list[dict]) -> None:
    """The public MoE rows' held-out errors (``held_out_gpu``), each point replayed again with ``FLAGS``."""
    from public_moe_rows import public_moe_rows

    again = {r["deployment"]: r["uncalibrated"] for r in public_moe_rows(extra_flags=FLAGS)}
    for r in rows:
        if r["deployment"] in again:
            r["held_out_gpu"] = again[r["deployment"]]


def _pool(rows: list[dict], skip_gpu: str | None = None) -> dict[str, dict[str, list[tuple[float, str, str]]]]:
    """regime → metric → (error, GPU id, deployment) of every held-out row but ``skip_gpu``'s."""
    out: dict[str, dict[str, list[tuple[float, str, str]]]] = {}
    for r in rows:
        g = _gpu_id(r["gpu"])
        if "held_out_gpu" not in r or g == skip_gpu:
            continue
        reg = out.setdefault(f"uncalibrated/{r.get('arch', 'dense')}/vllm", {m: [] for m in METRICS})
        for m in METRICS:
            reg[m] += [(e, g, r["deployment"]) for e in r["held_out_gpu"][m]]
    return out


def _floor(measured: dict, reg: str, m: str) -> tuple[float, float] | None:
    b = (measured.get(reg) or {}).get(m)
    return None if b is None else (b["q10"], b["q90"])


def unmeasured_bands(rows: list[dict], measured: dict) -> dict[str, dict[str, dict]]:
    """regime → metric → the unmeasured-GPU band with its data (``measured``: ``lodo_bands.bands(rows)``)."""
    from kvledger.ledgers.unmeasured_gpu import held_out_gpu_interval

    out: dict[str, dict[str, dict]] = {}
    for reg, ms in _pool(rows).items():
        for m, vals in ms.items():
            if not vals:
                continue
            e, g, d = zip(*vals)
            lo, hi, how = held_out_gpu_interval(list(e), list(g), _floor(measured, reg, m))
            per = {gpu: {"num_runs": g.count(gpu), "min": min(x for x, y in zip(e, g) if y == gpu),
                         "max": max(x for x, y in zip(e, g) if y == gpu)} for gpu in sorted(set(g))}
            out.setdefault(reg, {})[m] = {"q10": lo, "q90": hi, "num_runs": len(e), "num_deployments": len(set(d)),
                                          "num_gpus": len(set(g)), "gpu_ids": sorted(set(g)),
                                          "median_abs": float(np.median(np.abs(e))), "method": how, "per_gpu": per}
    return out


def coverage(rows: list[dict]) -> dict[str, dict[str, list[int]]]:
    """regime → metric → [covered, checked]: each GPU's held-out errors against the band of the other GPUs'."""
    from kvledger.ledgers.unmeasured_gpu import held_out_gpu_interval
    from lodo_bands import bands

    out: dict[str, dict[str, list[int]]] = {}
    for gpu in sorted({_gpu_id(r["gpu"]) for r in rows if "held_out_gpu" in r}):
        own = _pool([r for r in rows if _gpu_id(r["gpu"]) == gpu])
        others = _pool(rows, skip_gpu=gpu)
        measured = bands([r for r in rows if _gpu_id(r["gpu"]) != gpu])
        for reg, ms in own.items():
            for m, vals in ms.items():
                pool = (others.get(reg) or {}).get(m) or []
                if not vals or not pool:
                    continue
                lo, hi, _ = held_out_gpu_interval([x for x, _, _ in pool], [y for _, y, _ in pool],
                                                  _floor(measured, reg, m))
                c = out.setdefault(reg, {}).setdefault(m, [0, 0])
                c[0] += sum(lo <= x <= hi for x, _, _ in vals)
                c[1] += len(vals)
    return out


def section(rows: list[dict], measured: dict) -> dict:
    """``error_bands.json``'s ``unmeasured_gpu``: the bands, their coverage, the held-out GPUs and the method."""
    held: dict[str, list[str]] = {}
    for r in rows:
        if "held_out_gpu" in r:
            held.setdefault(_gpu_id(r["gpu"]), []).append(r["deployment"])
    return {"written_by": "python benchmarks/validate_all.py --sections lodo --write-bands (benchmarks/gpu_holdout.py)",
            "method": " ".join(__doc__.split("\n\n")[2:4]).replace("\n", " "),
            "held_out_gpus": dict(sorted(held.items())), "regimes": unmeasured_bands(rows, measured),
            "coverage_leave_one_gpu_out": coverage(rows)}


def _pct(v: float) -> str:
    return f"{v * 100:+.1f}%"


def table_lines(u: dict) -> list[str]:
    """The leave-one-GPU-out table, markdown (docs/calibration/validation-latency.md)."""
    lines = ["| regime | metric | held-out GPUs (values each, range) | q10 | q90 | values | deployments | "
             "covered (leave one GPU out) |", "|---|---|---|---|---|---|---|---|"]
    for reg, ms in u["regimes"].items():
        for m, b in ms.items():
            per = "; ".join(f"{g} ({p['num_runs']}: {_pct(p['min'])} … {_pct(p['max'])})"
                            for g, p in b["per_gpu"].items())
            cov = (u["coverage_leave_one_gpu_out"].get(reg) or {}).get(m)
            lines.append(f"| {reg} | {m} | {per} | {_pct(b['q10'])} | {_pct(b['q90'])} | {b['num_runs']} | "
                         f"{b['num_deployments']} | {f'{cov[0]}/{cov[1]}' if cov else '—'} |")
    return lines


def print_section(u: dict) -> None:
    print("\n== leave one GPU out: each GPU's runs priced as unprofiled: no GPU profile, carried floors ==")
    for reg, ms in u["regimes"].items():
        for m, b in ms.items():
            cov = (u["coverage_leave_one_gpu_out"].get(reg) or {}).get(m)
            per = ", ".join(f"{g} {_pct(p['min'])} … {_pct(p['max'])} ({p['num_runs']})"
                            for g, p in b["per_gpu"].items())
            print(f"  unmeasured-GPU band {reg} {m}: {_pct(b['q10'])} … {_pct(b['q90'])} over {b['num_runs']} values "
                  f"of {b['num_deployments']} deployments on {b['num_gpus']} GPUs [{per}]; "
                  + (f"covered {cov[0]}/{cov[1]} leaving each GPU out" if cov else "no other GPU to check against"))
            print(f"    {b['method']}")
