"""The client config an inference-perf run kept (``config.yaml``: its echo of the resolved client config), found
beside a stage file or a few folders above it, and the one fact the lifecycle reader and the stage replays both take
from it: the output length every request was generated to under ``ignore_eos``. (``kvledger.calibration.stage_launch``
reads the prompt pool from the same file.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CLIENT_FILE", "CLIENT_FILE_UP", "client_config", "client_config_path", "fixed_output_tokens"]

CLIENT_FILE = "config.yaml"  # inference-perf's echo of the resolved client config, beside the stage files
CLIENT_FILE_UP = 2  # or this many folders above them (``fixed_output_tokens``)


#: parsed client configs by (path, modification time, size): a stage's replay, its comparison and the readers of its
#: output length, prompt pool and client cap all ask for the same file
_PARSED: dict[tuple[str, int, int], Any] = {}


def client_config_path(stage_path: str | Path) -> Path | None:
    """The nearest client config file (``CLIENT_FILE``) beside the stage file or up to ``CLIENT_FILE_UP`` folders above
    it, or None: the one file every reader of the client config takes (``client_config``, the model the lifecycle
    reader names)."""
    here = Path(stage_path).resolve().parent
    return next((d / CLIENT_FILE for d in [here, *here.parents][:CLIENT_FILE_UP + 1] if (d / CLIENT_FILE).is_file()),
                None)


def client_config(stage_path: str | Path) -> tuple[Path, Any] | None:
    """The nearest client config (``CLIENT_FILE``) beside the stage file or up to ``CLIENT_FILE_UP`` folders above it,
    parsed: (path, YAML value, not to be modified); None when there is none or it cannot be read as YAML (it then
    states nothing). Parsed once per version of the file."""
    f = client_config_path(stage_path)
    if f is None:
        return None
    import yaml

    try:
        st = f.stat()
        key = (str(f), st.st_mtime_ns, st.st_size)
        if key not in _PARSED:
            _PARSED[key] = yaml.safe_load(f.read_text(encoding="utf-8-sig"))
        return f, _PARSED[key]
    except (OSError, yaml.YAMLError):
        return None


def fixed_output_tokens(stage_path: str | Path) -> int | None:
    """The output length every request of the stage was generated to, when its client config sent ``ignore_eos`` with
    one fixed ``shared_prefix.output_len``; else None. The client config is the nearest ``config.yaml`` beside the
    stage file or up to ``CLIENT_FILE_UP`` folders above it: inference-perf's echo beside the stages
    (inference-sim/training: ``<exp>/results/config.yaml``), or the one config a sweep of several launch
    configurations ran with (kubecon NA 2025: ``<sweep>/config.yaml`` over ``<sweep>/<launch>/results/``). The nearest
    file decides: one that states no fixed length is not overruled by another further up.

    Why it matters: with ``ignore_eos`` the engine generates ``max_tokens`` tokens, but inference-perf counts a
    response's ``output_len`` by re-tokenizing its text, which under-counts some (Llama-2-7B general at 8 req/s:
    mean 210, p10 60, against 248 requested; the same stage's inter-token latencies, two events per streamed token,
    put ~248.5 tokens in each response). A TPOT derived from the counted length is then too high (9.71 ms where the
    streamed tokens give 8.2 ms), and a replay drawing the counted lengths decodes too few tokens. An unreadable or
    other-shaped file states nothing (None).
    """
    cfg = client_config(stage_path)
    try:
        eos, n = cfg[1]["server"]["ignore_eos"], cfg[1]["data"]["shared_prefix"]["output_len"]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return n if eos is True and isinstance(n, int) and not isinstance(n, bool) and n > 1 else None
