"""The launch record an inference-perf stage file's harness kept beside it: which model, at which TP, under which
scheduler limits the measured engine ran — so a stage is read and replayed as the engine that served it, not on
defaults.

inference-sim/training (the BLIS simulator's fitting data) writes one ``exp-config.yaml`` per experiment, a folder
above its stage files (``<experiment>/exp-config.yaml``; the stages are ``<experiment>/results/stage_<k>_….json``)
with the keys its launch script passed to ``vllm serve``: ``model``, ``tensor_parallelism``, ``max_model_len``,
``max_num_batched_tokens``, ``max_num_seqs``. They become the run's ``engine_kwargs`` under vLLM's names (any other
key but ``model`` and ``app`` under ``other_flags``, which ``kvledger.calibration.run_record`` names): ``validate``
and ``calibrate`` replay with them (``kvledger.calibration.sweep``), and ``goodput`` and ``cost`` take the model and
the GPU count from them (``evidence.inference_perf``). A stage without such a file states nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence.sidecars import LAUNCH_FILE

__all__ = ["LAUNCH_FILE", "StageLaunch", "stage_launch"]

#: exp-config.yaml key → vLLM's engine argument (what ``run_record`` reads from ``engine_kwargs``)
#: exp-config.yaml keys that are no engine setting: the model (read apart) and the harness that drove it
_NOT_ENGINE = {"model", "app"}
_INT_KEYS = {"tensor_parallelism": "tensor_parallel_size", "max_model_len": "max_model_len",
             "max_num_batched_tokens": "max_num_batched_tokens", "max_num_seqs": "max_num_seqs"}


class StageLaunch:
    """What a stage's launch record states: ``model`` (HF id or None), ``engine_kwargs`` (vLLM names → ints) and the
    ``path`` read (None when there was none)."""

    __slots__ = ("model", "engine_kwargs", "path")

    def __init__(self, model: str | None = None, engine_kwargs: dict[str, int] | None = None,
                 path: str | None = None) -> None:
        self.model, self.engine_kwargs, self.path = model, dict(engine_kwargs or {}), path


def stage_launch(stage_path: str | Path) -> StageLaunch:
    """The launch record of the stage file at ``stage_path`` (module docstring); empty when none lies beside it.

    Raises:
        FormatError: the record exists but is not a YAML mapping, or a limit in it is not a positive integer.
    """
    p = Path(stage_path).resolve().parent
    rec = next((d / LAUNCH_FILE for d in (p, p.parent) if (d / LAUNCH_FILE).is_file()), None)
    if rec is None:
        return StageLaunch()
    import yaml

    try:
        raw: Any = yaml.safe_load(rec.read_text(encoding="utf-8-sig"))
    except (OSError, yaml.YAMLError) as e:
        raise FormatError(str(rec), f"cannot read the launch record as YAML ({e})") from None
    if not isinstance(raw, dict):
        raise FormatError(str(rec), "a launch record is a YAML mapping (model: …, tensor_parallelism: …)")
    kwargs = {}
    for key, name in _INT_KEYS.items():
        v = raw.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise FormatError(str(rec), f"{key} must be a positive integer, got {v!r}")
        kwargs[name] = v
    others = {k: v for k, v in raw.items() if k not in _INT_KEYS and k not in _NOT_ENGINE and v is not None}
    if others:  # named by run_record (refused, warned of or harmless), never dropped unsaid
        kwargs["other_flags"] = {str(k): v for k, v in others.items()}
    model = raw.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise FormatError(str(rec), f"model must be a model name, got {model!r}")
    return StageLaunch(model.strip() if model else None, kwargs, str(rec))
