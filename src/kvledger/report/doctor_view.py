"""Terminal view of ``kvledger doctor``: the log's start-up figures against the ledger, the options it echoed, and each
finding with its fixes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvledger.accounting.notes import NEWER_THAN_READ, NO_SUCH_RELEASE
from kvledger.analyses.doctor.context import LAUNCH_NOTE
from kvledger.analyses.doctor.replica_note import MORE_SERVERS
from kvledger.report.widths import PIPE_COLUMNS

if TYPE_CHECKING:
    from kvledger.analyses.doctor.types import DoctorReport

__all__ = ['TABLE_COLUMNS', 'render_doctor', 'table_width']



def _fmt(value: Any, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "B":
        from kvledger.units import fmt_bytes

        return fmt_bytes(value, both=False)
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "fraction":
        return f"{value:g}"
    return f"{value:,.0f}"


def _diff(value: Any, unit: str) -> str:
    if value is None:
        return ""
    if unit == "B":
        return f"{value / 2**30:+,.2f} GiB"
    return f"{value:+.2f}" if unit in ("x", "fraction") else f"{value:+,.0f}"


def _table(title: str, *cols: str) -> Any:
    from kvledger.report.tables import LedgerTable as Table

    t = Table(title=title, title_justify="left", title_style="bold")
    t.short_first = True  # a figure and its line stay whole; the source and explanation cells fold (TABLE_COLUMNS)
    for c in cols:
        t.add_column(c, overflow="fold")
    return t


TABLE_COLUMNS = 160
"""The widest a ``doctor -v`` table is drawn on a pipe or file, columns: its source and explanation cells fold to fit
(the evidence rows hold whole log lines), so a pipe or file, whose console is ``PIPE_COLUMNS`` wide (no $COLUMNS set),
still gets tables a 160-column terminal or pager shows. A terminal, or a $COLUMNS the user set, gives rich's console
its width (rich reads $COLUMNS first, then the terminal's size): the tables take that width, wider or narrower."""


def table_width(console_columns: int) -> int:
    """The width a ``doctor -v`` table is drawn at on a console ``console_columns`` wide, columns."""
    return TABLE_COLUMNS if console_columns >= PIPE_COLUMNS else console_columns


def _show(con: Any, t: Any) -> None:
    con.print(t, width=table_width(con.width))


def _startup(con: Any, cmp: Any) -> None:
    from rich.markup import escape

    t = _table("Settings used for the ledger", "setting", "value", "source")
    for k, v in cmp.settings.items():
        t.add_row(k, "—" if v["value"] is None else escape(str(v["value"])), escape(str(v["source"])))
    _show(con, t)
    t = _table("Start-up: the log against kvledger plan (ledger − log)", "term", "log (line)", "ledger", "difference",
               "explanation")
    for r in cmp.rows:
        line = f" (L{r.log_line})" if r.log_line else ""
        t.add_row(r.term, _fmt(r.log_value, r.unit) + line, _fmt(r.ledger_value, r.unit), _diff(r.difference, r.unit),
                  escape(r.explanation))
    _show(con, t)
    if cmp.consistent is not None:
        said = (cmp.reproduced if cmp.consistent
                else "the ledger does NOT reproduce the log's capacity figures: see the rows above")
        con.print("[bold]" + said + "[/]")
        if cmp.memory_miss:
            con.print(f"[bold yellow]{'but' if cmp.consistent else 'also'}[/] {escape(cmp.memory_miss)}")
        if cmp.memory_forecast:
            con.print(escape(cmp.memory_forecast))
    elif cmp.memory_only:
        con.print(f"[bold]capacity figures not checked: {escape(cmp.memory_only)}[/]")
    elif cmp.skipped:
        con.print(f"[bold]comparison with the ledger skipped: {escape(cmp.skipped)}[/]")
    for n in cmp.notes:
        con.print(f"· {escape(n)}")


def _options(con: Any, f: Any) -> None:
    from rich.markup import escape

    t = _table("Options (ledger, per replica)", "option", "GPUs", "blocks", "token slots", "engine figure at "
        "max_model_len",
               "requests of the size observed at saturation", "what it means")
    for o in f.options:
        t.add_row(escape(o["action"]), str(o["gpus_per_replica"]), f"{o['num_gpu_blocks']:,}", f"{o['token_slots']:,}",
                  f"{o['max_concurrency']:.2f}x at {o['max_model_len']:,}" if o["max_concurrency"] is not None else "—",
                  f"{o['requests_of_observed_size']:,}" if o["requests_of_observed_size"] is not None else "—",
                      escape(o["detail"]))
    _show(con, t)
    for n in (f.options[0].get("notes") or []):
        con.print(f"· {escape(n)}")


def _flag(f: Any) -> str:
    """FOUND, ok, or "not diagnosed" where the log held too little to judge (never an "ok" it has not earned)."""
    if f.triggered:
        return "[bold red]FOUND[/]"
    return "[green]ok[/]" if f.diagnosed else "[yellow]not diagnosed[/]"


def _finding(con: Any, f: Any) -> None:
    from rich.markup import escape

    con.print(f"\n{_flag(f)} [bold]{f.name}[/] ({f.verdict}): {escape(f.message)}")
    if f.options:
        _options(con, f)
    if f.evidence:
        t = _table("", "line", "time", "what", "value")
        for e in f.evidence[:12]:
            t.add_row(str(e["line"]), escape(str(e["time"] or "")), escape(e["what"]), escape(str(e["value"])))
        _show(con, t)
        if len(f.evidence) > 12:
            con.print(f"  … {len(f.evidence) - 12} more (see --json)")
    for n in f.notes:
        con.print(f"· {escape(n)}")
    con.print(f"[dim]rule: {escape(f.rule)}[/]")


def _refused_start(cmp: Any, max_len: str = "") -> str | None:
    """A start-up whose logged concurrency at max_model_len is below 1: vLLM refuses to start (not one request fits)."""
    rows = {r.term: r for r in cmp.rows}
    conc = next((r for t, r in rows.items() if t.startswith("max concurrency at ")), None)
    value = None if conc is None else (conc.log_value if conc.log_value is not None else conc.ledger_value)
    if value is None or value >= 1:
        return None
    tokens = next((r.log_value if r.log_value is not None else r.ledger_value
                   for t, r in rows.items() if t.startswith("KV capacity") or t.startswith("KV cache size")), None)
    pool = f" the pool holds {tokens:,.0f} tokens," if tokens else ""
    return (f"one request of max_model_len does not fit in the KV cache ({conc.term}: {value:.2f}x):{pool} so vLLM "
            f"refuses to start. Fixes: --max-model-len at most the pool's tokens{' ' + max_len if max_len else ''}, "
            "--kv-cache-dtype fp8, a higher "
            "--gpu-memory-utilization or more --tensor-parallel-size (kvledger plan re-plans each).")


def _available_kv(cmp: Any) -> str | None:
    """The headline memory check in one line: the log's available KV memory against the ledger's own plan, with the
    error; None where the log prints none, or where ``memory_miss`` or ``memory_forecast`` says it (both figures)."""
    from kvledger.units import GiB

    kv = cmp.row("available KV memory")
    if kv is None or not kv.log_value or cmp.memory_miss or cmp.memory_forecast:
        return None
    log = f"log {kv.log_value / GiB:.2f} GiB" + (f" (line {kv.log_line})" if kv.log_line else "")
    if kv.ledger_value is None or kv.difference is None:
        return f"available KV memory: {log}; {kv.explanation}"  # e.g. "no ledger figure: pass --gpu"
    return (f"available KV memory: {log}, kvledger {kv.ledger_value / GiB:.2f} GiB ({kv.difference / GiB:+.2f} GiB, "
            f"{kv.difference / kv.log_value:+.1%}; {cmp.memory_match or 'no criterion applied'})")


def _tp_word(logged: dict[str, Any] | None) -> str:
    """How the first row's GPUs per replica are known: "as logged" only where the log states or implies the TP."""
    src = (logged or {}).get("gpus_per_replica_source", "")
    if src.startswith(("log line", "at least")):
        return "as logged"
    return "as given by --tensor-parallel-size" if src.startswith("--tensor-parallel-size") else \
        "assumed: vLLM's default, the log prints no TP"


def _option_line(o: dict[str, Any], logged: dict[str, Any] | None) -> str:
    """One remedy in a line: its blocks per replica and the GPUs it takes where more than one (or other than as
    logged), the requests of the size observed it holds; a shorter limit than those requests says it would refuse
    them; an option that adds no capacity says so, and --max-num-seqs the blocks its re-planned pool gains."""
    n, g = o["requests_of_observed_size"], o["gpus_per_replica"]
    g0 = logged["gpus_per_replica"] if logged is not None else g
    if logged is not None and n == 0 and o["max_model_len"] < logged["max_model_len"]:
        return (f"would refuse the requests observed (they hold more than {o['max_model_len']:,} tokens each at "
                "saturation): no remedy for this traffic")
    gpus = f" of {g} GPUs ({g0} {_tp_word(logged)})" if g != g0 else (f" of {g} GPUs" if g > 1 else "")
    same = logged is not None and o is not logged and (o["num_gpu_blocks"], n) == (
        logged["num_gpu_blocks"], logged["requests_of_observed_size"])
    d = o.get("num_gpu_blocks_change")  # --max-num-seqs: re-planned at the cap, the pool it frees memory for
    moved = f" ({d:+,} blocks, {o['num_gpu_blocks_change_pct']:+.1f}%, re-planned at this cap)" if d else ""
    k = o.get("no_preemption_max_num_seqs")  # --max-num-seqs: whole max_model_len requests the pool holds
    safe = ("" if not k else f"; none can be preempted at --max-num-seqs {k} or fewer ({k:,} requests of "
            f"max_model_len {o['max_model_len']:,} tokens fit the pool as logged)")
    if o.get("stand_in_gpu"):  # the log names no GPU: its terms at this TP are a stand-in GPU's (capacity_options)
        gpus = gpus.removesuffix(")") + "; its per-GPU terms on a stand-in GPU, --gpu names yours)"
    return (f"{o['num_gpu_blocks']:,} blocks per replica{moved}{gpus}"
            + (f", {n:,} requests of the size observed at saturation" if n is not None else "") + safe
            + (f": no capacity added, {logged['action']} (it refuses or queues the excess instead of preempting it; "
               "--verbose says how)" if same else ""))


def _brief(con: Any, rep: Any) -> None:
    """The answer in a few lines: does the ledger reproduce the start-up, and what each diagnosis found."""
    from rich.markup import escape

    cmp = rep.startup
    for n in (x for x in rep.notes if x.startswith("model: ")):  # a bundled config standing in for the log's model
        con.print(escape(n))
    for n in (x for x in rep.notes if NEWER_THAN_READ in x or NO_SUCH_RELEASE in x):  # as plan says it
        con.print(f"note: {escape(n)}")
    if cmp is None:
        con.print("start-up: no memory or capacity lines in this log (nothing to compare with the ledger)")
        for n in (x for x in rep.notes if x.startswith(LAUNCH_NOTE)):
            con.print(escape(n))
    elif cmp.consistent is not None:
        said = (cmp.reproduced if cmp.consistent
                else "the ledger does NOT reproduce the log's capacity figures (--verbose shows the rows)")
        con.print("start-up: " + said)
        if kv := _available_kv(cmp):
            con.print(f"start-up: {escape(kv)}")
        if cmp.memory_miss:
            con.print(f"start-up: [bold yellow]{'but' if cmp.consistent else 'also'}[/] {escape(cmp.memory_miss)}")
        if cmp.memory_forecast:
            con.print(f"start-up: {escape(cmp.memory_forecast)}")
    elif cmp.memory_only:
        con.print(f"start-up: capacity figures not checked: {escape(cmp.memory_only)}")
    elif cmp.skipped:
        con.print(f"start-up: comparison with the ledger skipped: {escape(cmp.skipped)}")
    refused = _refused_start(cmp, rep.max_len_fix) if cmp is not None else None
    if rep.override_started:  # vLLM V1 < 0.21: the check judged the memory, not the override; it started
        con.print("[bold red]FOUND[/] [bold]start-up[/] (max_model_len_never_finishes): "
                  + escape(rep.override_started))
    elif refused:
        con.print(f"[bold red]FOUND[/] [bold]start-up[/] (max_model_len_does_not_fit): {escape(refused)}")
    for f in rep.findings:
        if rep.not_started and not f.triggered:  # a server that never served: its traffic findings say nothing
            con.print(f"[dim]— {f.name}: not diagnosed (the server did not start)[/]")
            continue
        con.print(f"{_flag(f)} [bold]{f.name}[/] ({f.verdict}): {escape(f.message)}")
        logged = f.options[0] if f.options and f.options[0]["action"] in ("as logged", "as modelled") else None
        for o in f.options:
            con.print(f"  → {escape(o['action'])}: {escape(_option_line(o, logged))}")
        for n in (x for x in (f.options[0].get("notes") or [] if f.options else [])
                  if x.startswith("--gpu-memory-utilization is not raised")):
            con.print(f"  → {escape(n)}")  # why the option a manager asks about is not among them
        for n in (x for x in f.notes if x.startswith(MORE_SERVERS)):  # "add a GPU" as one more server
            con.print(f"  → {escape(n)}")
        if f.triggered and not f.options:  # what to pass for the remedies in numbers (the finding's notes say it)
            for n in (x for x in f.notes if "for the options in numbers" in x):
                con.print(f"  → {escape(n)}")
    con.print("[dim]the full reading (settings and start-up terms against the ledger, evidence lines, remedies "
              "re-planned, "
              "rules): --verbose; for scripts: --json[/]")


def _counting(rep: DoctorReport) -> str:
    """How the log counts preemptions, for the summary line: the words once — where a finding printed below already
    carries them (the capacity finding of a log that cannot show preemptions), a pointer to it instead."""
    words = rep.log_summary["preemption_counting_words"]
    said = next((f.name for f in rep.findings if words and words in f.message), None)
    return words if said is None else f"this log cannot show them; the {said} finding below says why"


def render_doctor(rep: DoctorReport, verbose: bool = False) -> None:
    """Print the reading: the summary (verdicts and remedies) and, with ``verbose``, every table, evidence line and
    rule."""
    from rich.console import Console
    from rich.markup import escape

    con, s = Console(highlight=False, emoji=False), rep.log_summary
    con.print(f"[bold]kvledger doctor[/] {escape(rep.source)}: vLLM {s['version'] or '(version unknown)'} — "
              f"{escape(s['version_source'])}; "
              f"{s['generation'] or '?'} engine; "
              + (f"ledger rules of {s['rules_version']}" if s["rules_version"] else "no ledger rules")
              + f" ({escape(s['rules_reason'])})")
    con.print(f"{s['vllm_lines']:,} of {s['total_lines']:,} lines read ({s['skipped_lines']:,} skipped as unknown); "
              f"{s['metrics_lines']:,} metrics lines, {s['preemption_lines']:,} per-preemption warning lines"
              + (f" (preemptions: {escape(_counting(rep))})" if s["metrics_lines"] else ""))
    for line in rep.lifecycle:  # several start-ups (the verdict is the last one's), an operator's stop
        con.print(f"[bold]{escape(line)}[/]")
    for w in rep.warnings:
        con.print(f"[bold red]WARNING:[/] [bold]{escape(w)}[/]")
    if not verbose:
        _brief(con, rep)
        return
    if rep.startup is not None:
        _startup(con, rep.startup)  # its notes begin with the report's own (analyses/doctor/startup.py)
    else:
        con.print("no start-up memory or capacity lines in this log (nothing to compare with the ledger)")
    for f in rep.findings:
        _finding(con, f)
    for n in rep.notes if rep.startup is None else ():
        con.print(f"· {escape(n)}")
