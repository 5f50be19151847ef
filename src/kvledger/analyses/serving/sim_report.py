"""``kvledger simulate``'s report of one run (``simulate_document``): the summary, the engine and workload it ran, and
how the run went — an open loop's queue growth (with the max_num_seqs cap where it held the batch), a paced loop's
clients behind their rate, a run too short to tell, a burst at t = 0 read at its running batch's peak
(``burst_read``) — with the error bands that apply. Apart from ``sim_document``, whose records ``queue_growth``
reads, so that neither imports the other."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.serving.rejections import count_rejections
from kvledger.analyses.serving.sim_document import PACED_MODE, SimDocument, rejected_warning
from kvledger.jsonable import to_jsonable

__all__ = ["simulate_document", "kept_up"]


def simulate_document(setup: Any, result: Any) -> SimDocument:
    """What ``kvledger simulate`` reports (its ``--json`` and ``summary.json``): the summary with its invariants
    checked, the engine, workload and step cost it ran, and an open loop's queue growth (None when it kept up).
    ``setup``: the ``sim_setup.SimSetup`` run; ``result``: its ``SimResult``."""
    from kvledger.analyses.serving import prediction_bands as pb
    from kvledger.analyses.serving.preemption_why import preemption_facts
    from kvledger.analyses.serving.prefix_ids import with_prefix_ids_note
    from kvledger.analyses.serving.session_tipping import tipping_note
    from kvledger.analyses.serving.sim_batch import batch_occupancy, launch_prefix_caching
    from kvledger.analyses.serving.sim_dp import dp_figures
    from kvledger.invariants import check_sim_summary

    mode = setup.workload_info.get("mode", "")
    overload, short, behind, dp_sat, burst = _load_read(setup, result, mode)
    info, notes = with_prefix_ids_note(setup)  # a 0 % hit rate by construction says so
    at_once = instant_burst(result.records, mode) if overload is None and short is None else None
    held = at_once is not None and at_once.saturated  # a burst past what the engine runs at once: saturated
    kept_up = (mode.startswith("open loop") or mode == PACED_MODE) and overload is None and short is None and not held
    sat = (overload is not None and not behind) or held
    bands = {} if short else pb.prediction_bands(setup, result.summary.to_dict(), saturated=sat, kept_up=kept_up)
    bands, knee = pb.knee_withheld(bands, result.records)  # its TTFT band withheld at the knee
    if behind and overload.cap_held:  # the client's cap, not the engine, held the load: no capacity to band
        bands = {k: v for k, v in bands.items() if k != "throughput"}
    notes += [overload.note] + ([] if behind else [pb.no_latency_band(mode)]) if overload else \
        [short.note, pb.NO_BAND_SHORT_RUN] if short else [at_once.note()] if held else []
    # a burst has no rate, so no knee: its TTFT grew through the burst's prefill queue (burst_read)
    notes += [pb.burst_ttft_note(knee) if at_once is not None else pb.knee_band_note(knee, mode)] if knee else []
    notes += [burst.burst_note()] if burst is not None else []
    preempted = preemption_facts(setup, result)
    notes += tipping_note(setup, result, preempted)  # a session run's KV tipping point, named with its figures
    engine = {**result.config, **launch_prefix_caching(getattr(setup, "plan", None), result.config)}
    notes += _pause_note(setup, result, engine)  # SGLang's prefill steps: the decode time they paused
    summary = check_sim_summary(result.summary).to_dict()
    rej = count_rejections(setup) if summary["num_rejected"] else None  # the --max-model-len that serves them
    notes = [w for w in [rejected_warning(summary, engine, rej.fix_words() if rej else "")] if w] + notes  # first
    return SimDocument(summary, setup.replicas,
                       setup.router if setup.replicas > 1 else None, engine, info, setup.cost_info,
                       to_jsonable(overload), bands, notes, setup.client_latency, too_short=to_jsonable(short),
                       burst=at_once, at_knee=knee, preemptions=preempted, pipeline=_pp_figures(setup, result),
                       batch=batch_occupancy(result.records.records, _engine_running_max(result), _engines(setup)),
                       data_parallel=dp_figures(setup, result, dp_sat[0] if dp_sat else None, too_short=bool(short),
                                                run_grew=overload is not None and not behind))


def _pause_note(setup: Any, result: Any, engine: dict) -> list[str]:
    """The line on the decode time SGLang's prefill steps paused (``sglang_pauses``), for one engine: one replica, no
    DP ranks (their steps share no timeline); [] elsewhere or where none was paused."""
    from kvledger.analyses.serving.sglang_pauses import decode_pauses

    if engine.get("batching") != "sglang" or setup.replicas > 1 or getattr(setup.cost, "dp", 1) > 1:
        return []
    paused = result.extra.get("sglang_paused_request_s")
    got = decode_pauses(paused[0], result.records) if paused else None
    return [got.note()] if got is not None else []


def kept_up(setup: Any, result: Any) -> bool:
    """Whether ``simulate``'s own read finds an open-loop run kept up: no queue growth (per DP rank too), not too short
    to tell — what its output says as "no rank's queue grew" or with no overload line (``_load_read``)."""
    mode = setup.workload_info.get("mode", "")
    if not mode.startswith("open loop"):
        return False
    overload, short, *_ = _load_read(setup, result, mode)
    return overload is None and short is None


def _engines(setup: Any) -> int:
    """The run's schedulers: replicas × DP ranks (sim_dp.py)."""
    return setup.replicas * getattr(setup.cost, "dp", 1)


def _load_read(setup: Any, result: Any, mode: str) -> tuple[Any, Any, bool, Any, Any]:
    """(overload, too short, a paced loop behind its rate, the DP ranks' read, a growth the trace's bursts explain) of
    the run: an open loop's queue growth (with the max_num_seqs cap where it held the batch), a paced loop's clients
    behind their rate, a run too short to tell; each None where it does not apply."""
    from kvledger.analyses.serving.knee_rule import quarter_growth
    from kvledger.analyses.serving.probe_length import probe_too_short
    from kvledger.analyses.serving.queue_growth import open_loop_check, run_overload
    from kvledger.analyses.serving.seq_cap import with_seq_cap

    overload, short = open_loop_check(result.records) if mode.startswith("open loop") else \
        (run_overload(result.records, mode, {**setup.workload_info, "max_running": setup.config.max_num_seqs *
                                             _engines(setup)}), None)
    paced = mode == PACED_MODE
    behind = paced and overload is not None  # its clients behind their rate: banded as a closed loop (paced_loop.py)
    if paced and not behind:  # it kept its rate: read as the open loop it then was (queue growth, too short)
        overload, short = open_loop_check(result.records)
    dp_sat = _per_rank(setup, result, mode) if not paced else None  # DP ranks: judged rank by rank (dp_saturation)
    if dp_sat is not None and overload is None and dp_sat[1] is not None:
        # a rank's queue grew past its Bonferroni burst allowance where the group's did not show it: saturation, even
        # where the group's read was too short to tell (the rank's own requests were long enough to read)
        overload, short = dp_sat[1], None
    overload = with_seq_cap(overload, setup, result)  # the batch sat at max_num_seqs with KV to spare: said
    # a growth the trace's bursts explain, in a run long enough to show its load (probe_length) whose mean TTFT did
    # not climb to a knee (knee_rule): kept up, said so
    burst = overload if getattr(overload, "kept_up", False) and overload.seq_cap is None \
        and probe_too_short(result.records, mode, _latency_s(setup)) is None \
        and not (quarter_growth(result.records) or {}).get("grew") else None
    return None if burst is not None else overload, short, behind, dp_sat, burst


def instant_burst(run: Any, mode: str) -> Any:
    """An open loop whose every request arrived at one instant, read as a burst (``ledgers.burst_read``: saturated or
    one batch); None for any other run."""
    from kvledger.ledgers.burst_read import all_at_once, read_burst

    return read_burst(run) if mode.startswith("open loop") and all_at_once(run) else None


def _per_rank(setup: Any, result: Any, mode: str) -> tuple[list[Any], Any] | None:
    """(each DP rank's queue growth, the first saturated rank's as the run's: None where none grew) of an open loop on
    DP ranks (``dp_saturation``); None without DP ranks or in a closed loop."""
    from kvledger.analyses.serving.dp_saturation import rank_growths, rank_overload

    ranks, dp = getattr(result, "dp_ranks", None), getattr(setup.cost, "dp", 1)
    if ranks is None or dp <= 1 or not mode.startswith("open loop"):
        return None
    growths = rank_growths(result.records, ranks, dp)
    return growths, rank_overload(growths, dp)


def _engine_running_max(result: Any) -> int | None:
    """The largest running batch any replica counted at its steps; None where a replica's count is a lower bound
    (SGLang's arrival stretches) or none was kept."""
    if not result.batch or not all(b.get("running_max_exact", True) for b in result.batch):
        return None
    return max(b.get("running_max", 0) for b in result.batch)


def _latency_s(setup: Any) -> float:
    """The run's --client-latency, s (0 without one): its records' arrivals were moved that much earlier."""
    return setup.client_latency.seconds if setup.client_latency else 0.0


def _pp_figures(setup: Any, result: Any) -> dict[str, Any] | None:
    """The run's pipeline figures (``sim_pp.pp_figures``); None without stages."""
    from kvledger.analyses.serving.sim_pp import pp_figures

    return pp_figures(setup, result)
