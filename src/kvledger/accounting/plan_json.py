"""The parts of a plan's JSON that say more than their records: the model with its headline figures, the KV ledger at
the binding pipeline stage, and the memory plan with its shortfall (``Plan.to_dict`` writes them by ``to_jsonable``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.kvcache import KVLedger
from kvledger.accounting.kvlayout import KVLayout
from kvledger.accounting.memory import MemoryPlan
from kvledger.accounting.resolved_defaults import resolved_prefix_caching
from kvledger.accounting.settings import PlanSettings
from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.quant import online_fp8
from kvledger.jsonable import to_jsonable
from kvledger.units import GiB

__all__ = ["ModelFacts", "KVFacts", "MemoryFacts", "stage_scope", "ALL_LAYERS", "resolved_settings",
           "settings_json"]

ALL_LAYERS = "all layers"

_FRACTIONS = ("gpu_memory_utilization", "mem_fraction_static", "free_gpu_memory_fraction")


def resolved_settings(plan) -> PlanSettings:
    """The settings a plan ran with: the given ones (``plan.settings``, nodes assumed included) with each engine default
    the plan resolved in their place: the engine version whose rules apply, max_model_len, the batch limits, the block
    size (SGLang: page size), the memory fraction the engine uses, vLLM's prefix caching and the contexts of the
    concurrency rows. The JSON
    writes these as ``settings`` and the settings as given (None: the engine's default) as ``given``."""
    s, m = plan.settings, plan.memory
    update = {"max_model_len": m.max_model_len, "max_num_batched_tokens": m.max_num_batched_tokens,
              "max_num_seqs": m.max_num_seqs, "block_size": m.block_size,
              "engine_version": (m.engine_version if s.engine == "vllm" else  # SGLang's "0.5.23 rules": 0.5.23
                                 s.engine_version or m.engine_version.removesuffix(" rules")),
              "contexts": tuple(r.context_tokens for r in plan.concurrency)}
    if m.cuda_graph_max_bs is not None:  # SGLang's decode graph cap, in the TensorRT-LLM setting's key
        update["cuda_graph_max_batch_size"] = m.cuda_graph_max_bs
    if m.fraction_name in _FRACTIONS:
        update[m.fraction_name] = m.fraction
    if (pc := resolved_prefix_caching(plan)) is not None:  # vLLM: the release's default where none was given
        update["enable_prefix_caching"] = pc[0]
    return s.model_copy(update=update)


def settings_json(plan) -> dict:
    """The JSON's ``settings``: :func:`resolved_settings` with every value ``resolved_from`` lists in its key, so each
    default the plan resolved reads the same in both (``async_scheduling``, ``model_runner``, ``mamba_cache_mode``:
    no field of ``PlanSettings`` carries them, and ``settings`` left them out while ``resolved_from`` named them)."""
    from kvledger.accounting.resolved_defaults import resolved_from

    out = to_jsonable(resolved_settings(plan))
    out.update({name: r["value"] for name, r in resolved_from(plan).items()})
    return out


def stage_scope(stage: dict) -> str:
    """The scope of a PP plan's per-GPU KV figures: the binding stage's rank and layers (``MemoryPlan.stages``)."""
    lo, hi = stage["layers"]
    return f"binding pipeline stage PP{stage['rank']}: layers {lo}–{hi} ({stage['num_layers']} layers)"


@dataclass(frozen=True)
class ModelFacts:
    """The model's JSON: its spec, then the KV bytes per token (TP 1, B/token), the weight bytes (B) and the parameter
    counts its model card states (``kvledger.catalog.models.stated_params``; None when it has no catalog row).
    ``quantization`` says the checkpoint's scheme, and where ``--quantization fp8`` quantizes an unquantized
    checkpoint on load, that online FP8 as served (``weight_bytes`` stays the checkpoint's)."""

    __json__ = ("**spec", ("quantization", "quantization_text"), "kv_bytes_per_token", "weight_bytes",
                "stated_params", "stated_active_params")
    spec: ModelSpec
    kv_bytes_per_token: float
    stated_params: int | None
    stated_active_params: int | None
    online_fp8: bool = False

    @property
    def quantization_text(self) -> str:
        """The checkpoint's scheme, or with online FP8 what vLLM serves (``catalog.quant.online_fp8``)."""
        if not self.online_fp8:
            return self.spec.quant.description
        return f"{online_fp8().description}, served from the checkpoint ({self.spec.quant.description})"

    def weight_bytes(self) -> float:
        """The weights, B (``ModelSpec.weight_bytes``)."""
        return self.spec.weight_bytes()

    @classmethod
    def of(cls, spec: ModelSpec, kv: KVLedger, quantization: str | None = None) -> ModelFacts:
        from kvledger.catalog.models import stated_params

        st = stated_params(spec.catalog_id) if spec.catalog_id else None
        return cls(spec, kv.bytes_per_token_model, st.total if st else None, st.active if st else None,
                   quantization == "fp8" and spec.quant.method == "none")

    def to_dict(self) -> dict:
        return to_jsonable(self)


@dataclass(frozen=True)
class KVFacts:
    """The KV ledger's JSON. ``per_gpu_scope`` says what every per-GPU figure (``bytes_per_token_per_gpu``,
    ``growing_bytes_per_token_per_gpu``, ``state_bytes_per_seq_per_gpu``, ``groups``) covers: "all layers", or with
    pipeline parallelism the binding stage's layers alone (a GPU holds only its stage's KV); then the same three
    figures over every layer at this TP follow with the suffix ``_all_layers``. ``bytes_per_token_model`` is always
    the whole model at TP 1 (B/token)."""

    __json__ = ("**shown", ("bytes_per_token_model", "kv.bytes_per_token_model"), ("notes", "kv.notes"),
                "per_gpu_scope", ("bytes_per_token_per_gpu_all_layers", "all_layers_bytes_per_token"),
                ("growing_bytes_per_token_per_gpu_all_layers", "all_layers_growing_bytes_per_token"),
                ("state_bytes_per_seq_per_gpu_all_layers", "all_layers_state_bytes_per_seq"))
    __json_optional__ = ("bytes_per_token_per_gpu_all_layers", "growing_bytes_per_token_per_gpu_all_layers",
                         "state_bytes_per_seq_per_gpu_all_layers")
    kv: KVLedger
    stage: KVLedger | None = None
    stage_label: str | None = None

    @property
    def shown(self) -> KVLedger:
        """The ledger the per-GPU figures come from: the binding stage's with PP, else every layer's."""
        return self.stage if self.stage is not None else self.kv

    @property
    def per_gpu_scope(self) -> str:
        return self.stage_label if self.stage is not None and self.stage_label else ALL_LAYERS

    def _all(self, name: str) -> float | None:
        """A figure of every layer at this TP, per GPU (None without PP, where the per-GPU figures already are)."""
        return None if self.stage is None else getattr(self.kv, name)

    @property
    def all_layers_bytes_per_token(self) -> float | None:
        return self._all("bytes_per_token")

    @property
    def all_layers_growing_bytes_per_token(self) -> float | None:
        return self._all("growing_bytes_per_token")

    @property
    def all_layers_state_bytes_per_seq(self) -> float | None:
        return self._all("state_bytes_per_seq")

    def to_dict(self) -> dict:
        return to_jsonable(self)


@dataclass(frozen=True)
class MemoryFacts:
    """The memory plan's JSON with nothing negative left for KV: available KV floored at 0 (B and GiB) and its range
    floored the same way, the shortfall below 0 (B) and, when the range reaches below 0, the shortfall's range (B), the
    block layout and the in-flight tokens it reserves."""

    __json__ = ("**plan", ("available_kv_bytes", "available_kv_shown_bytes"),
                ("available_kv_gib", "available_kv_shown_gib"), ("ranges", "ranges_shown"), "kv_shortfall_bytes",
                "layout", "inflight_tokens")
    plan: MemoryPlan
    layout: KVLayout | None
    inflight_tokens: int

    @property
    def available_kv_shown_bytes(self) -> float:
        """max(0, available KV), B."""
        return max(0.0, self.plan.available_kv_bytes)

    @property
    def available_kv_shown_gib(self) -> float:
        """max(0, available KV), GiB (2^30 B)."""
        return self.available_kv_shown_bytes / GiB

    @property
    def kv_shortfall_bytes(self) -> float:
        """How far the budget falls short of any KV, B (0 when it does not)."""
        return max(0.0, -self.plan.available_kv_bytes)

    @property
    def ranges_shown(self) -> dict[str, tuple[float, float]]:
        """The plan's ranges with available KV floored at 0 like its point; when the low end is below 0, a
        ``kv_shortfall_bytes`` range follows it: (max(0, −high), max(0, −low)), B."""
        rng = self.plan.ranges.get("available_kv_bytes")
        if rng is None or rng[0] >= 0:
            return self.plan.ranges
        out: dict[str, tuple[float, float]] = {}
        for key, value in self.plan.ranges.items():
            if key != "available_kv_bytes":
                out[key] = value
                continue
            out[key] = (max(0.0, value[0]), max(0.0, value[1]))
            out["kv_shortfall_bytes"] = (max(0.0, -value[1]), max(0.0, -value[0]))
        return out

    def to_dict(self) -> dict:
        return to_jsonable(self)
