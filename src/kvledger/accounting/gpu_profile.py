"""The GPU profile: a GPU's achieved efficiency (the roofline's achievable FLOP/s and bandwidth fractions) fitted on
measured runs of any model, which then prices every model on that GPU.

Written by ``kvledger calibrate --scope gpu`` (``kvledger.calibration.gpu_fit``); read by ``--gpu-profile FILE`` and,
for a GPU with bundled measurements, by default (``accounting/data/gpu_profiles/*.json``, one per GPU, each naming its
data, fit and error; a file with ``"default": false`` only as ``--gpu-profile bundled:NAME``). Layout (``"kind":
"kvledger-gpu-profile"``, ``"version"`` 1 to 4): ``gpu`` (catalog name), ``flops_fraction``, ``bandwidth_fraction``;
version 2 also ``host_step_s`` and ``host_seq_s`` (the host's time per step and per sequence in series with the GPU,
s; 0 in version 1); version 3 also ``gemm_efficiency`` ("flat", or "measured": ``flops_fraction`` scales the GPU's
measured matmul curve, ``accounting.gemm_efficiency``; 1–2 are flat); version 4 also ``allreduce_link_share`` (null,
or the TP all-reduce's share of its link fitted on TP > 1 runs: ``calibration.link_fit``); ``fit``, ``runs`` (each
run's model, TP, engine release and errors under the fit), ``data_files``, ``source``. A later version is refused
with it named. A model-scope profile (``kvledger.accounting.calibration_profile``) refines one model at one TP on top.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from kvledger.accounting.calibration_profile import GPU_PROFILE_KIND, PROFILE_KIND, read_profile_json
from kvledger.accounting.gpu_profile_runs import checked_runs
from kvledger.errors import FormatError, InputError

__all__ = ["GPU_PROFILE_KIND", "GpuProfile", "load_gpu_profile", "bundled_gpu_profile", "resolve_gpu_profile",
           "looks_like_gpu_profile", "run_facts", "profile_fit", "same_gpu"]


@dataclass(frozen=True)
class GpuProfile:
    """A GPU's fitted efficiency and where it came from.

    Attributes:
        gpu: catalog name of the GPU it was fitted on. flops_fraction / bandwidth_fraction: achieved shares of the
            datasheet peak FLOP/s and HBM bandwidth, 0–1. source: the file (or bundled name) and its data, in words.
        fit_error: the fit's headline errors (mean TTFT/TPOT error per run), for the output.
        data: the fitted runs' sources (a validation of one of them is in-sample, and says so); a run recorded with
            ``"saturated": true`` was listed but left out of the fit (benchmarks/build_h100_profile.py fits the stages
            below saturation), so it is not among them.
        label: the profile in a few words, for a "priced by" line (``GPU profile FILE (fitted on RUNS)``).
        host_step_s / host_seq_s: host time per step and per sequence in series with the GPU, s (0 in version 1).
        gemm_efficiency: "flat" (versions 1–2) or "measured" (``flops_fraction`` scales the measured GEMM curve).
        runs: per fitted run, its label, model, TP, whether it was saturated (None: not stated) and its in-sample
            errors ``ttft_mean`` / ``tpot_mean`` / ``throughput`` (predicted/measured − 1; None: not stated), for the
            band (``kvledger.ledgers.profile_band``).
        checks: the same for runs of other models or TPs priced by the profile but not fitted on (the file's
            ``out_of_sample``): out-of-sample errors, which the band of another model or TP takes in.
        allreduce_link_share: the fitted share of the link's bandwidth (``tp_comm.link_bytes_per_s``); None: the rule's.
        recommended: False where the fit priced its own runs no better than no profile, or TTFT alone set its FLOP
            fraction (the file's "recommended"); ``recommended_note``: why, where the file says.
    """

    gpu: str
    flops_fraction: float
    bandwidth_fraction: float
    source: str
    fit_error: str = ""
    data: tuple[str, ...] = ()
    label: str = ""
    host_step_s: float = 0.0
    host_seq_s: float = 0.0
    runs: tuple[dict, ...] = ()
    gemm_efficiency: str = "flat"
    checks: tuple[dict, ...] = ()
    allreduce_link_share: float | None = None
    recommended: bool = True
    recommended_note: str = ""


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def run_facts(r: Any) -> dict:
    """A profile run's label, model, TP, saturation, errors, kernel family (``moe``: True for an MoE model, False for
    a dense one, None in a file that does not say) and engine release (``engine``: "vLLM 0.19.0" as its record states
    it; None where the file does not say or the release was assumed; ``GpuProfile.runs`` and ``checks``)."""
    num = _num
    sat = r.get("saturated")
    if isinstance(sat, dict):  # calibrate's record (calibration.saturation): the sides whose queue kept growing
        sat = "measured" in (sat.get("sides") or [])
    return {"label": str(r.get("label") or r.get("model")), "model": str(r.get("model")),
            "source": str(r.get("source") or ""), "sha256": str(r.get("sha256") or ""),  # the run file's content
            "tp": int(r["tp"]) if isinstance(r.get("tp"), int) else None,
            "saturated": sat if isinstance(sat, bool) else None,
            "moe": r["moe"] if isinstance(r.get("moe"), bool) else None,
            "engine": str(r["engine"]) if r.get("engine") and r.get("engine_recorded") is True else None,
            **{m: num(r.get(f"{m}_rel_error")) for m in ("ttft_mean", "tpot_mean", "throughput")}}


def looks_like_gpu_profile(path: str | Path) -> bool:
    """True when ``path`` is a JSON file of kind ``kvledger-gpu-profile``."""
    p = Path(path)
    if not p.is_file() or p.suffix != ".json":
        return False
    try:
        return json.loads(p.read_text(encoding="utf-8")).get("kind") == GPU_PROFILE_KIND
    except (OSError, ValueError, AttributeError):
        return False


def _from_dict(d: Any, where: str) -> GpuProfile:
    if isinstance(d, dict) and d.get("kind") == PROFILE_KIND:  # one model's step costs: --step-cost's file
        raise FormatError(where, "a model-scope calibration profile (`kvledger calibrate --scope model`), not a GPU "
                                 f"profile: pass it with --step-cost {where}")
    if not isinstance(d, dict) or d.get("kind") != GPU_PROFILE_KIND:
        raise FormatError(where, f"not a kvledger GPU profile (expected \"kind\": \"{GPU_PROFILE_KIND}\"; write one "
                                 "with `kvledger calibrate FILE... --scope gpu --out GPU.json`)")
    version = d.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version not in (1, 2, 3, 4):
        raise FormatError(where, f"GPU profile version {version!r}: this kvledger reads versions 1 to 4 (refit with "
                                 "`kvledger calibrate FILE... --scope gpu --out GPU.json`, or update kvledger)")
    try:
        ff, bf = float(d["flops_fraction"]), float(d["bandwidth_fraction"])
        gpu = str(d["gpu"])
        h0, h1 = float(d.get("host_step_s", 0.0)), float(d.get("host_seq_s", 0.0))
        gemm = str(d.get("gemm_efficiency", "flat")) if version >= 3 else "flat"
        share = None if d.get("allreduce_link_share") is None else float(d["allreduce_link_share"])
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(where, f"malformed GPU profile ({e}): it needs gpu, flops_fraction, bandwidth_fraction "
                                 "(numbers), and allreduce_link_share a number or null") from None
    bad = [f"{k} {v:g}" for k, v in zip(("flops_fraction", "bandwidth_fraction", "allreduce_link_share"),
                                        (ff, bf, share)) if v is not None and not 0 < v <= 1]
    if bad or (share is not None and version < 4):
        raise FormatError(where, f"{', '.join(bad)}: each must be in (0, 1]" if bad else "allreduce_link_share in a "
                          "version < 4 file: version 4 is the first that carries it (set \"version\": 4, or refit)")
    if gemm not in ("flat", "measured"):
        raise FormatError(where, f"gemm_efficiency {gemm!r}: a GPU profile's is 'flat' or 'measured'")
    if not (0 <= h0 <= 1 and 0 <= h1 <= 0.01):
        raise FormatError(where, f"host terms out of range: host_step_s {h0:g} s (0–1), host_seq_s {h1:g} s (0–0.01)")
    runs = checked_runs(d, "runs", where)
    facts = tuple(run_facts(r) for r in runs)
    names = run_names(runs)
    data = ", ".join(dict.fromkeys(names)) or "unnamed runs"  # each run named once
    if len(runs) <= _LIST_RUNS:
        errs = _fit_errors(runs, names, facts)
    else:  # many stages: by model and TP, the errors as a range
        data = f"{len(runs)} runs of " + ", ".join(dict.fromkeys(f"{r.get('model')} TP {r.get('tp')}" for r in runs))
        below = [r for r, f in zip(runs, facts) if f["saturated"] is not True]
        errs = "; ".join(f"{name} {_span([r.get(f'{k}_rel_error') for r in below])}"
                         for name, k in (("TTFT", "ttft_mean"), ("TPOT", "tpot_mean"))) + " below saturation"
    engines = ", ".join(sorted({f["engine"] for f in facts if f["engine"]}))
    data += f"; {engines}" if engines else ""  # the release whose per-step host time the fractions carry
    src = f"GPU profile {where}: fitted on {data} (kvledger.calibration.gpu_fit)"
    return GpuProfile(gpu, ff, bf, src, errs, tuple(str(r["source"]) for r in runs
                                                                          if r.get("source") and r.get("saturated")
                                                                          is not True),
                      f"GPU profile {where} (fitted on {data})", h0, h1, facts, gemm,
                      tuple(run_facts(r) for r in checked_runs(d, "out_of_sample", where)), share,
                      d.get("recommended") is not False, str(d.get("recommended_note") or ""))



_LIST_RUNS = 4  # a profile of more runs names them by model and TP


def run_names(runs: list[dict[str, Any]]) -> list[str]:
    """Each run's name in the profile's label, one per run: its ``label``, except that runs of one label from
    different files are named by the folder that tells them apart (``names.file_labels``, as calibrate and validate
    label them: ``vllm/stage_0``). A run listed twice (same label, same file) keeps its name, so the label names it
    once."""
    from kvledger.names import file_labels

    names = [str(r.get("label")) for r in runs]
    sources = [str(r.get("source") or "") for r in runs]
    clash = [i for i, n in enumerate(names)
             if sources[i] and len({sources[j] for j, m in enumerate(names) if m == n}) > 1]
    if clash:
        unique = list(dict.fromkeys(sources[i] for i in clash))
        renamed = dict(zip(unique, file_labels(unique)))
        for i in clash:
            names[i] = renamed[sources[i]]
    return names


def _fit_errors(runs: list[dict[str, Any]], names: list[str], facts: tuple[dict[str, Any], ...]) -> str:
    """``M TP 1: run_a TTFT −12%, TPOT +3%; run_b TTFT …``: the model and TP once, each run once (by ``names``); a
    saturated run by its throughput, the figure it is judged on (its latency measures its queue)."""
    groups: dict[str, dict[str, str]] = {}
    for r, name, f in zip(runs, names, facts):
        groups.setdefault(f"{r.get('model')} TP {r.get('tp')}", {}).setdefault(
            name, f"throughput {_pct(r.get('throughput_rel_error'))} (saturated)" if f["saturated"] else
            f"TTFT {_pct(r.get('ttft_mean_rel_error'))}, TPOT {_pct(r.get('tpot_mean_rel_error'))}")
    return "; ".join(f"{model}: " + "; ".join(f"{n} {e}" for n, e in by_run.items())
                     for model, by_run in groups.items())


def _span(vals: list[Any]) -> str:
    v = [x for x in vals if isinstance(x, (int, float))]
    return f"{_pct(min(v))} … {_pct(max(v))}" if v else "n/a"


def _pct(v: Any) -> str:
    return f"{v * 100:+.0f}%" if isinstance(v, (int, float)) else "n/a"


def load_gpu_profile(path: str | Path) -> GpuProfile:
    """The GPU profile in ``path``, or the bundled one named ``bundled:NAME`` (a file under
    ``accounting/data/gpu_profiles``, with or without ``.json``: also those not used by default).

    Raises:
        FormatError: missing file, not JSON, another kind of file or out-of-range fractions.
    """
    if str(path).startswith(BUNDLED_PREFIX):
        name = str(path)[len(BUNDLED_PREFIX):]
        f = _bundled_dir() / (name if name.endswith(".json") else name + ".json")
        if not f.is_file():
            have = ", ".join(BUNDLED_PREFIX + g.stem for g in sorted(_bundled_dir().glob("*.json")))
            raise FormatError(str(path), f"no bundled GPU profile of that name (bundled: {have})")
        return _from_dict(json.loads(f.read_text(encoding="utf-8")), f"bundled:{f.name}")
    p = Path(path)
    st = p.stat() if p.is_file() else None
    return _profile_file(str(p), str(p.resolve()), (st.st_mtime_ns, st.st_size) if st else None)


@functools.lru_cache(maxsize=16)
def _profile_file(path: str, resolved: str, stamp: tuple[int, int] | None) -> GpuProfile:
    """``path`` read once per (its resolved path, modification time and size): a search names it for every
    candidate; the profile is labelled with ``path`` as given."""
    return _from_dict(read_profile_json(Path(path), "no such GPU profile (write one with `kvledger calibrate FILE... "
                                                    "--scope gpu --out GPU.json`)"), path)


def _bundled_dir() -> Path:
    return Path(str(resources.files("kvledger.accounting") / "data" / "gpu_profiles"))


BUNDLED_PREFIX = "bundled:"
#: catalog names of one board sold in two editions (the same GB202 die, 96 GB GDDR7 and clocks; another cooler): a GPU
#: profile of one prices the other, as its measured curve does (``vidur_profiles.SAME_DIE``)
SAME_BOARD = {"nvidia rtx pro 6000 blackwell workstation edition": "nvidia rtx pro 6000 blackwell server edition"}


def same_gpu(a: str, b: str) -> bool:
    """Whether a profile fitted on GPU ``a`` prices GPU ``b`` (catalog names): the same GPU, or one board's editions."""
    a, b = a.lower(), b.lower()
    return a == b or SAME_BOARD.get(a) == b or SAME_BOARD.get(b) == a


@functools.lru_cache(maxsize=32)
def bundled_gpu_profile(gpu_name: str, opt_in: bool = False) -> GpuProfile | None:
    """The bundled profile fitted on ``gpu_name`` (catalog name, case-insensitive) that commands use by default, or
    None. A file with ``"default": false`` (its ``default_note`` says why) is used only when named,
    ``--gpu-profile bundled:NAME``; ``opt_in`` finds such a file too (to tell a user it exists)."""
    folder = _bundled_dir()
    if not folder.is_dir():
        return None
    for f in sorted(folder.glob("*.json")):
        d = json.loads(f.read_text(encoding="utf-8"))
        if d.get("default") is False and not opt_in:
            continue
        if same_gpu(str(d.get("gpu", "")), gpu_name):
            return _from_dict(d, f"bundled:{f.name}")
    return None


def resolve_gpu_profile(choice: str | None, gpu_name: str) -> GpuProfile | None:
    """The profile ``--gpu-profile`` selects for a run on ``gpu_name``: None or "auto" → the bundled one (None when the
    GPU has none), "none" → None, else a file. A file fitted on another GPU is refused.

    Raises:
        FormatError: unreadable file. InputError: a profile fitted on another GPU.
    """
    if choice is None or choice == "auto":
        return bundled_gpu_profile(gpu_name)
    if choice == "none":
        return None
    prof = load_gpu_profile(choice)
    if not same_gpu(prof.gpu, gpu_name):
        raise InputError(f"--gpu-profile {choice} was fitted on {prof.gpu}, not {gpu_name}: a GPU's efficiency "
                         "does not "
                         "carry to another GPU (calibrate this one with `kvledger calibrate --scope gpu`, or pass "
                         "--gpu-profile none)")
    return prof


def profile_fit(choice: str | None, gpu_name: str) -> tuple[dict[str, Any], str] | None:
    """(the ``fit`` object, the profile's name) of the GPU profile ``--gpu-profile`` selects for ``gpu_name`` (as
    :func:`resolve_gpu_profile` selects it), or None when none prices it. ``fit`` holds what the fit left out of the
    fractions, e.g. ``set_up_frontend_s`` (each set-up's client and front-end latency, s); {} when absent.

    Raises:
        FormatError: unreadable file. InputError: a profile fitted on another GPU.
    """
    prof = resolve_gpu_profile(choice, gpu_name)
    if prof is None:
        return None
    if choice is None or choice == "auto" or str(choice).startswith(BUNDLED_PREFIX):
        name = str(choice)[len(BUNDLED_PREFIX):] if choice and choice != "auto" else None
        files = [f for f in sorted(_bundled_dir().glob("*.json")) if f.stem == (name or "").removesuffix(".json")
                 or (name is None and f"bundled:{f.name}" in prof.label)]
        path, where = files[0], f"bundled:{files[0].stem}"
    else:
        path, where = Path(choice), str(choice)
    fit = json.loads(path.read_text(encoding="utf-8")).get("fit")
    return (fit if isinstance(fit, dict) else {}), where
