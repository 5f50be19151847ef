"""The files a reader takes in beside a measured-run file without the user naming them, so that no command writes
over one: ``kvledger.outputs`` refuses an input as an output location even with ``--force``, and these are inputs
too (a fresh-user trial's ``goodput stage_2_lifecycle_metrics.json --out config.yaml --force`` replaced the client
config beside the stage file that it had just read).

- ``config.yaml``: inference-perf's client config (model, output length, prompt pool, client cap), the nearest one
  beside the file or up to ``CLIENT_FILE_UP`` folders above (``inference_perf_client.client_config_path``);
- ``manifests.yaml``: its Kubernetes manifests beside the file or one folder up (``k8s_manifests.manifests_path``);
- ``exp-config.yaml`` (``LAUNCH_FILE``): a stage's launch record, beside the file or one folder above
  (``kvledger.evidence.launch_record``);
- ``meta.json`` beside an LLMServingSim ``requests.jsonl`` (``llmservingsim``) and the run's ``timeseries.csv`` there
  (not read, but the run's own record: ``calibrate requests.jsonl --out timeseries.csv --force`` replaced it with a
  profile in a fresh-user trial), ``<name>_aiperf.json`` beside an
  AIPerf ``<name>.jsonl`` (``aiperf``), and llmperf's ``…summary…`` beside its ``…individual_responses…`` file;
- every file in a folder given as an input (a run folder is read whole: a fresh-user trial's ``calibrate run --out
  run/requests.jsonl --force`` replaced the measured requests it had read with the profile).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kvledger.evidence.inference_perf_client import client_config_path

__all__ = ["LAUNCH_FILE", "MANIFESTS_FILE", "implicit_inputs", "sidecar_hint", "summary_hint"]

LAUNCH_FILE = "exp-config.yaml"  # a stage's launch record (kvledger.evidence.launch_record)
MANIFESTS_FILE = "manifests.yaml"  # inference-perf's Kubernetes manifests (evidence.inference_perf)


def _beside(p: Path) -> list[Path | None]:
    """The files the readers may take in beside ``p`` (a file, or a folder a reader takes whole)."""
    folder = p if p.is_dir() else p.parent
    out: list[Path | None] = [client_config_path(folder / "_"), folder / MANIFESTS_FILE, folder.parent / MANIFESTS_FILE,
                              folder / LAUNCH_FILE, folder.parent / LAUNCH_FILE, folder / "meta.json"]
    if p.is_dir():  # a run folder is read whole (its requests.jsonl, timeseries.csv, …): every file in it is an input
        out += sorted(c for c in p.iterdir() if c.is_file())
    if p.name.endswith(".jsonl"):
        out.append(p.with_name(p.name[: -len(".jsonl")] + "_aiperf.json"))
    if p.name == "requests.jsonl":  # an LLMServingSim run folder's own scheduler record (run_folder.beside_run)
        out.append(folder / "timeseries.csv")
    for old in ("individual_responses", "individual"):
        if old in p.name:
            out.append(p.with_name(p.name[::-1].replace(old[::-1], "summary"[::-1], 1)[::-1]))
            break
    return out


def implicit_inputs(paths: Iterable[Any]) -> list[Path]:
    """The files beside the inputs ``paths`` that a reader may take in unnamed (module docstring), those that exist,
    each once. A path that is no file or folder (a catalog name, a DistServe run name) has none."""
    out: list[Path] = []
    for x in paths:
        if x is None:
            continue
        try:
            p = Path(x).resolve()
            if not p.exists():
                continue
            out += [c for c in _beside(p) if c is not None and c.is_file() and c != p]
        except (OSError, ValueError):  # a name longer than the file system allows, a NUL byte: no file
            continue
    return list(dict.fromkeys(out))


def sidecar_hint(path: str | Path, value: object = None) -> str | None:
    """When ``path`` is one of the files above that a reader takes in beside a run (or another file of an LLMServingSim
    run, or an inference-perf file that is no stage report: ``_report_hint``), what to give instead, naming the run's
    files that are there; None for any other file. ``value``: the file's loaded content."""
    from kvledger.evidence.llmperf import bench_digest_hint
    from kvledger.evidence.llmservingsim import run_file_hint

    p = Path(path)
    if (hint := run_file_hint(p, value) or bench_digest_hint(p, value)) is not None:
        return hint
    what = {LAUNCH_FILE: "a stage's launch record",
            MANIFESTS_FILE: "an inference-perf run's Kubernetes manifests"}.get(p.name)
    if what is None:
        return _report_hint(p, value)
    return (f"This {p.name} holds {what}, read beside the stage reports: give a stage_N_lifecycle_metrics.json"
            + _stage_reports(p.parent))


def _stage_reports(folder: Path) -> str:
    """"; beside it: stage_0_…, …" naming the stage lifecycle reports in ``folder`` or one folder below, or "; none is
    beside it"."""
    try:
        reports = sorted(r.relative_to(folder).as_posix() for r in [
            *folder.glob("stage_*lifecycle_metrics.json"), *folder.glob("*/stage_*lifecycle_metrics.json")])
    except OSError:
        reports = []
    return ("; beside it: " + ", ".join(reports[:3]) + (f" and {len(reports) - 3} more" if len(reports) > 3 else "")
            if reports else "; none is beside it")


def _report_hint(p: Path, value: object) -> str | None:
    """What an inference-perf file that is not a stage's lifecycle report is, and which file to give instead: the
    summary over all stages, a stage's (or the summary's) Prometheus report, the client config (config.yaml, or
    inference-sim's profile.yaml: a YAML mapping with inference-perf's ``load`` or ``api`` sections)."""
    from kvledger.errors import running

    cmd = running()
    if p.name.endswith("prometheus_metrics.json"):
        twin = p.with_name(p.name.replace("prometheus_metrics", "lifecycle_metrics"))
        instead = (f"give {cmd} {twin} (the client's lifecycle report of the same stage)" if twin.is_file()
                   else "give the stage's stage_N_lifecycle_metrics.json")
        return (f"This {p.name} is inference-perf's Prometheus report: server-side histograms scraped from the engine, "
                f"which do not say when each request was sent or how the client timed it; {instead}")
    if p.name.startswith("summary") and p.name.endswith("lifecycle_metrics.json"):
        return summary_hint(p)
    if p.suffix in (".yaml", ".yml") and isinstance(value, dict) and {"load", "api"} & set(value):
        return (f"This {p.name} is an inference-perf client config (what the client sent: load, data, api), read "
                f"beside the stage reports it produced; give {cmd} a stage_N_lifecycle_metrics.json"
                + _stage_reports(p.parent))
    return None


def summary_hint(p: Path) -> str:
    """What inference-perf's summary over every stage is, and what to give the command running instead: ``goodput`` and
    ``cost`` read one load's run (its goodput would be an average over every load, of no one of them), the replays
    (``validate``, ``calibrate``) replay one load; with several files, this one is to be left out."""
    from kvledger.errors import running

    cmd = running()
    if cmd in ("kvledger goodput", "kvledger cost"):
        across = "with --target for the SLO capacity across them" if cmd.endswith("goodput") else \
            "to price the run at their SLO capacity"
        why, instead = ("its goodput would average over every load, not measure any one",
                        f"give {cmd} one stage_N_lifecycle_metrics.json, or the stage files alone (leave this summary "
                        f"out) {across}")
    else:
        why, instead = ("no one load can be replayed from it",
                        f"give {cmd} one stage_N_lifecycle_metrics.json, or all of them with --sweep")
    return (f"This {p.name} is inference-perf's summary over every stage of the run: it pools all the load rates and "
            f"records none, so {why}; {instead}" + _stage_reports(p.parent))
