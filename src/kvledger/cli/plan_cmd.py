"""``kvledger plan``: the KV-cache ledger for a model on a GPU under an engine's rules."""

from __future__ import annotations

import dataclasses

import typer

from kvledger import strict_json
from kvledger.accounting.advice_trtllm_len import SERVED_AT_LOWER_LEN
from kvledger.cli.broken_pipe import will_end_with
from kvledger.cli.flag_groups import SIM_ONLY, GroupUse, TierFlags, with_groups
from kvledger.cli.plan_flags import PlanFlags, PlanMoreFlags, plan_inputs

__all__ = ["register"]


#: the tier flags plan takes: all but the simulated rules (a plan sizes the tiers, it runs no store or eviction rule)
_TIERS = GroupUse(TierFlags, only=tuple(f.name for f in dataclasses.fields(TierFlags) if f.name not in SIM_ONLY))


@with_groups(flags=GroupUse(PlanFlags, first_spelling=True), tiers=_TIERS,
             more=GroupUse(PlanMoreFlags, first_spelling=True))
def plan(
    model: str = typer.Argument(..., help="Bundled model (HF id or alias; see `kvledger models`), a config.json path "
                                          "or folder, or a Hub id."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU (see `kvledger gpus`) or a .json/.toml GPU file."),
    flags: PlanFlags = PlanFlags(),
    tiers: TierFlags = TierFlags(),
    more: PlanMoreFlags = PlanMoreFlags(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Print the whole ledger (every term with its source, "
                                                                "the waterfall, the roofline tables, every note) after "
                                                                "the summary."),
) -> None:
    """The KV-cache ledger: KV bytes per token, the engine's memory split, blocks, concurrency and the roofline."""
    from kvledger.accounting.plan import build_plan
    from kvledger.cli.plan_tiers import plan_tier_plan, plan_tier_settings

    spec, g, settings, prof = plan_inputs(model, gpu, flags, more)
    settings_t, settings = plan_tier_settings(tiers, more, g, settings)  # HiCache: SGLang's prefill-graph rule
    p = _chunked_prefill_budget(spec, g, settings, flags, build_plan(spec, g, settings))
    given = flags.allreduce_link_share is not None
    priced = _priced_by(p, prof, given, verbose)
    tier_plan = plan_tier_plan(p, tiers, settings_t, flags, more)  # None without tier flags
    startup = p.memory.startup
    starts = ("fits", SERVED_AT_LOWER_LEN)  # TensorRT-LLM, SGLang start serving shorter requests: exit 0 (advice_*_len)
    cannot_start = (p.advice and p.advice.verdict not in starts) or (
        startup is not None and startup.verdict in ("refuses", "runs_out"))  # --wddm: the engine would not start
    will_end_with(3 if cannot_start else 0)  # kept by a reader that stops reading (`| head -1`)
    if as_json:
        from kvledger.analyses.plans import plan_document

        d = plan_document(p, prof, given)  # simulate's keys in the roofline: its priced_by, its link terms
        if tier_plan is not None:
            d["kv_tiers"] = tier_plan.to_dict()
        typer.echo(strict_json.dumps(d, indent=2))
    else:
        _show(p, gpu, priced, tier_plan, verbose)
        if (mem := _datasheet_note(gpu, flags)) is not None:
            typer.echo(f"note: {mem}")
        if given and p.settings.tp == 1:
            typer.echo("note: --allreduce-link-share has nothing to price at TP 1 (no TP all-reduce)")
    if cannot_start:
        raise typer.Exit(code=3)


def _chunked_prefill_budget(spec, g, settings, flags: PlanFlags, p):
    """``p``, or with vLLM's chunked prefill turned off and no budget given, the plan at the budget the engine sets:
    max(max_model_len, default) (``engine/arg_utils.py``, 0.11.1–0.33.0; 0.8–0.11.0's V1 forces chunked prefill on,
    and the flag has no effect), whose tokens ``profile_run`` profiles, so the activation peak grows and the pool
    shrinks. A note says which."""
    from kvledger.accounting import vllm_rules as R
    from kvledger.accounting.chunked_budget import chunked_off_budget, chunked_off_budget_error, forced_on_note
    from kvledger.accounting.plan import build_plan
    from kvledger.errors import InputError

    if flags.enable_chunked_prefill is not False:
        return p
    m = p.memory
    if m.engine != "vllm":
        raise InputError(f"--no-enable-chunked-prefill is a vLLM flag; with --engine {m.engine} give the token "
                         "budget itself (--max-num-batched-tokens, SGLang's --chunked-prefill-size)")
    if R.v1_forces_chunked_prefill(R.parse_version(m.engine_version)):
        note = forced_on_note(m.engine_version, m.max_num_batched_tokens)
    elif flags.max_num_batched_tokens is not None:
        if msg := chunked_off_budget_error(m.max_num_batched_tokens, m.max_model_len):  # vLLM refuses it
            raise InputError(msg)
        note = f"chunked prefill off: max_num_batched_tokens {m.max_num_batched_tokens:,} as given"
    else:
        mnbt, note = chunked_off_budget(m.max_model_len, m.max_num_batched_tokens)
        if mnbt != m.max_num_batched_tokens:
            p = dataclasses.replace(build_plan(spec, g, dataclasses.replace(settings, max_num_batched_tokens=mnbt)),
                                    given=p.given or settings)  # `given`: the flags as given, the budget not
    return dataclasses.replace(p, memory=dataclasses.replace(p.memory, notes=(*p.memory.notes, note)))


def _priced_by(p, prof, given: bool, verbose: bool = True) -> list[str]:
    """What priced the roofline beyond the plan's assumptions, in ``simulate``'s words: the GPU profile, then, at
    TP > 1, the TP all-reduces' link share where one is set (``given``: by --allreduce-link-share, else the profile's
    fit); a TP group over nodes in one line unless ``verbose``."""
    from kvledger.accounting.plan_roofline import tp_span
    from kvledger.accounting.tp_comm import link_words
    from kvledger.analyses.serving.roofline_choice import LINK_GIVEN

    if p.roofline is None:  # the model does not fit: no roofline was priced (the plan says so)
        return []
    out = [f"gpu: {prof.label}"] if prof is not None else []
    share, tp = p.settings.allreduce_link_share, p.settings.tp
    words = link_words(p.gpu, share, LINK_GIVEN if given else None) if tp > 1 else ""
    if words:  # a share set, or the PCIe rule's default (a scale-up link at its catalog figure needs no words)
        out.append("TP all-reduces " + words)
    span = tp_span(p.gpu, p.settings)  # a TP group over nodes: NCCL's ring over their NICs (tp_network.py)
    return out + ([f"TP all-reduces {span.words() if verbose else span.brief()}"] if span is not None else [])


def _datasheet_note(gpu: str, flags: PlanFlags) -> str | None:
    """The note where --gpu-memory gives a catalog GPU's datasheet capacity, not CUDA's device total
    (``catalog.gpu_file.datasheet_memory_note``)."""
    from kvledger.catalog.gpu_file import datasheet_memory_note, resolve_gpu
    from kvledger.units import parse_memory_flag

    if flags.gpu_memory is None:
        return None
    return datasheet_memory_note(resolve_gpu(gpu), parse_memory_flag(flags.gpu_memory, what="--gpu-memory"))


def _show(p, gpu: str, priced: list[str], tier_plan, verbose: bool) -> None:
    """The plan as tables, then the GPU alias note, the roofline's pricing (``_priced_by``; a GPU profile's with the
    fractions it gave) and the tiers when there are any."""
    from rich.console import Console
    from rich.markup import escape

    from kvledger.report.kv_tiers_view import render_kv_tiers
    from kvledger.report.plan_view import render_plan
    from kvledger.report.tables import print_gpu_alias_note

    render_plan(p, Console(emoji=False), verbose=verbose)
    print_gpu_alias_note(Console(emoji=False), gpu, brief=not verbose)  # the short plan's: one line at 80 columns
    if priced:
        s = p.settings
        words = [w + (f" (achievable {s.achievable_flops_fraction:.0%} FLOP/s, {s.achievable_bandwidth_fraction:.0%} "
                      "bandwidth)" if w.startswith("gpu: ") else "") for w in priced]
        Console(emoji=False).print(escape("roofline priced by: " + "; ".join(words)))
    if tier_plan is not None:
        render_kv_tiers(tier_plan, Console(emoji=False))


def register(app: typer.Typer) -> None:
    """Add ``plan`` to the app."""
    app.command("plan")(plan)
