"""``kvledger simulate``: serve a real or synthetic trace on a simulated engine sized by the memory plan (vLLM's;
SGLang's
for ``--policy sglang``)."""

from __future__ import annotations

from pathlib import Path

import typer

from kvledger.cli.dp_flags import SIM_DP, SimDataParallelFlags
from kvledger.cli.flag_groups import EngineFlags, GroupUse, TierFlags, WorkloadFlags, with_groups
from kvledger.cli.session_flags import SESSION_MAX_MODEL_LEN_HELP, SessionFlags
from kvledger.cli.sim_opts import TIER_HELP

__all__ = ["register"]

#: the tier flags as simulate takes them: SGLang's apply with --policy sglang (SGLang's memory plan and radix cache)
_TIERS = GroupUse(TierFlags, help=TIER_HELP)


#: the engine flags as simulate takes them: --max-model-len's default is 32K for a session workload
_ENGINE = GroupUse(EngineFlags, help={"max_model_len": SESSION_MAX_MODEL_LEN_HELP})


@with_groups(workload=WorkloadFlags, sessions=SessionFlags, engine=_ENGINE, tiers=_TIERS, dp=SIM_DP)
def simulate(
    model: str = typer.Argument(..., help="Bundled model (HF id or alias), a config.json path or a Hub id."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU (see `kvledger gpus`) or a GPU file."),
    workload: WorkloadFlags = WorkloadFlags(),
    sessions: SessionFlags = SessionFlags(),
    engine: EngineFlags = EngineFlags(),
    tiers: TierFlags = TierFlags(),
    dp: SimDataParallelFlags = SimDataParallelFlags(),  # vLLM's DP ranks of a MoE model (sim_dp.py)
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    out: Path | None = typer.Option(None, "--out", help="Write records.parquet (every request, token times included; "
                                                        "goodput and cost read it), steps.parquet (every engine step) "
                                                        "and summary.json here."),
    force: bool = typer.Option(False, "--force", help="Allow --out to overwrite existing files."),
    chrome_trace: bool = typer.Option(False, "--chrome-trace", help="With --out, also write trace.json "
                                                                    "(chrome://tracing / Perfetto; one JSON document, "
                                                                    "large for long runs)."),
    record_token_times: bool = typer.Option(False, "--record-token-times", help="Keep every token time of every "
                                                                                "request (on with --out: the records "
                                                                                "file carries them for ITL SLOs). Off, "
                                                                                "memory follows the active requests "
                                                                                "and the ITL distribution is still "
                                                                                "exact."),
    seeds: int = typer.Option(1, "--seeds", help="Run the same simulation with seeds --seed, --seed+1, … (N in all, "
                                                 "1 to 64; about N times the time) and add each figure's min–max over "
                                                 "them; the figures shown stay the first seed's. A note says when a "
                                                 "banded figure moves more than 10% with the draw."),
) -> None:
    """Simulate serving a trace or multi-turn sessions: TTFT/ITL/TPOT/E2E distributions, throughput, KV usage,
    preemptions, prefix-cache hits; with a host KV tier, the hit rate, loads and TTFT per tier."""
    from kvledger.cli.simulate_run import run_simulate

    run_simulate(model, gpu, workload, sessions, engine, tiers, as_json, out, force, chrome_trace, record_token_times,
                 seeds, dp)


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)
