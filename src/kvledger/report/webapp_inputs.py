"""What the web app lets a request name: bundled models, catalog GPUs and bundled traces, and files only under the
folder given to ``kvledger ui --data-dir``.

``kvledger ui --host 0.0.0.0`` answers anyone on the network, so a request must not make the server read an
arbitrary local file (``model=/etc/passwd`` would come back as a parse error quoting it). The rule: a name from the
catalogs is always accepted; anything else is a path and is read only when it resolves (symbolic links and ``..``
followed) to a file inside the ``--data-dir`` folder; without ``--data-dir`` no local file is read. Hub ids are not
fetched (the plan loads models with ``allow_hub=False``).
"""

from __future__ import annotations

from pathlib import Path

from kvledger.errors import InputError

__all__ = ["check_web_model", "check_web_gpu", "check_web_trace", "check_web_lengths", "check_web_pool", "RULE"]

RULE = ("the web app reads bundled models, catalog GPUs and bundled traces by name, and local files only inside the "
        "folder given to `kvledger ui --data-dir DIR`")


def _inside(value: str, what: str, data_dir: Path | None, known: list[str]) -> str:
    """The absolute path ``value`` names inside ``data_dir`` (relative paths start there); otherwise InputError, or
    UnknownNameError with the closest of the ``known`` names when no data folder was given."""
    from kvledger.names import check_name_or_path

    check_name_or_path(value, what)
    if data_dir is None:
        from kvledger.errors import UnknownNameError

        raise UnknownNameError(what, value[:200], known, hint=f"The web app accepts no local file here: {RULE}, and "
                               "none was given.")
    root = data_dir.resolve()
    try:
        path = (root / Path(value).expanduser()).resolve()
    except (OSError, RuntimeError) as err:
        raise InputError(f"{what} {value[:200]!r}: not a usable path ({err})") from None
    if not path.is_relative_to(root):
        raise InputError(f"{what} {value[:200]!r} is outside the data folder: {RULE} (here {root})")
    if not path.is_file() and not (what == "model" and (path / "config.json").is_file()):  # a model folder
        raise InputError(f"{what} {value[:200]!r}: no such file in the data folder {root}")
    return str(path)


def check_web_model(value: str, data_dir: Path | None) -> str:
    """A bundled model name or alias as given, or a config file (or a folder holding config.json) inside ``data_dir``
    as its absolute path; InputError otherwise."""
    from kvledger.catalog.models import bundled_models, resolve_bundled

    if resolve_bundled(value) is not None:
        return value
    return _inside(value, "model", data_dir, [m.hf_id for m in bundled_models()])


def check_web_gpu(value: str, data_dir: Path | None) -> str:
    """A catalog GPU name as given; a GPU file (.json/.toml, the only kind ``resolve_gpu`` reads) only inside
    ``data_dir``, as its absolute path."""
    return _inside(value, "GPU file", data_dir, []) if Path(value).suffix in (".json", ".toml") else value


def check_web_trace(value: str, data_dir: Path | None) -> str:
    """A bundled trace name as given, or a trace file inside ``data_dir`` as its absolute path. A bundled trace without
    arrival times (lengths only) is refused before any work: the capacity search scales a trace's own arrivals."""
    from kvledger.dynamics.workload.traces import list_traces, require_arrivals

    traces = {t.name: t for t in list_traces()}
    info = traces.get(value.strip().lower())
    if info is not None:
        n = info.name
        require_arrivals(n, "the serving panel's capacity search replays a trace's own arrivals at scaled rates",
                         f"; or its lengths with Poisson arrivals: prompt_lengths trace:{n}:prompt and output_lengths "
                         f"trace:{n}:output (the form fills them in when you pick it)")
    return value if info is not None else _inside(value, "trace", data_dir, list(traces))


def check_web_lengths(value: str | None, data_dir: Path | None) -> str | None:
    """A length distribution as given (``fixed:512``, ``lognormal:…``), with the trace a ``trace:NAME:prompt|output``
    form reads held to the trace rule: a bundled trace's name, or a file inside ``data_dir`` (its absolute path put
    in); a file elsewhere is refused before anything reads it, as the trace field refuses one."""
    if value is None or not value.strip().lower().startswith("trace:"):
        return value
    from kvledger.dynamics.workload.traces import list_traces

    name, sep, kind = value.strip()[len("trace:"):].rpartition(":")
    if not sep:  # no kind: the length parser's own refusal says the form
        return value
    traces = {t.name for t in list_traces()}
    where = name if name.strip().lower() in traces else _inside(name, "trace", data_dir, sorted(traces))
    return f"trace:{where}:{kind}"


def check_web_pool(value: str | None, data_dir: Path | None) -> str | None:
    """A document pool (``K:L[:zipf=S|:uniform]``) as given, its document lengths ``L`` held to the trace rule as the
    lengths fields are (``check_web_lengths``: ``200:trace:FILE:prompt`` reads a file only inside ``data_dir``), so
    the pool's parser never opens a file elsewhere (its error would quote the file's first line)."""
    if value is None:
        return None
    parts = value.split(":")
    law = parts[-1].strip().lower()
    tail = parts[-1:] if len(parts) > 2 and (law == "uniform" or law.startswith("zipf=")) else []
    lengths = ":".join(parts[1:len(parts) - len(tail)])
    if len(parts) < 2 or not lengths.strip().lower().startswith("trace:"):
        return value  # no trace read: the pool's parser refuses any other form in its own words
    return ":".join([parts[0], check_web_lengths(lengths, data_dir), *tail])
