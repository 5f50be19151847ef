"""A custom GPU from a small JSON or TOML file (name, memory as CUDA reports it, bandwidth, dense peaks), validated."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvledger.catalog.gpus import GpuSpec, custom_gpu, get_gpu, gpu_catalog
from kvledger.errors import InputError

__all__ = ["gpu_file", "resolve_gpu", "check_device_memory", "datasheet_memory_note"]


@lru_cache(maxsize=1)
def _gpu_file_model() -> Any:
    """The pydantic model of a GPU file, built on first use (importing pydantic and building it cost tens of ms that
    catalog GPUs never need)."""
    from pydantic import BaseModel, ConfigDict, Field, field_validator

    class GpuFile(BaseModel):
        """A custom GPU file, validated: every figure finite and within what an accelerator can physically have."""

        model_config = ConfigDict(extra="forbid", strict=False)

        name: str = Field(default="custom GPU", min_length=1, max_length=255)
        memory: str | float = Field(description='memory as CUDA reports it: "79.22GiB", "80GB" or a number of bytes')
        bandwidth_tb_s: float = Field(gt=0, le=1000, allow_inf_nan=False)
        bf16_tflops: float = Field(gt=0, le=1e6, allow_inf_nan=False)
        fp8_tflops: float | None = Field(default=None, gt=0, le=1e6, allow_inf_nan=False)
        base: str | None = Field(default=None, min_length=1, max_length=255)
        interconnect_gb_s: float | None = Field(default=None, ge=0, le=1e5, allow_inf_nan=False)
        host_link_gb_s: float | None = Field(default=None, gt=0, le=1e5, allow_inf_nan=False)

        @field_validator("memory", mode="before")
        @classmethod
        def _memory(cls, v: Any) -> Any:
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise ValueError("must be a size such as \"79.22GiB\" or a number of bytes")
            if isinstance(v, str) and len(v) > 64:
                raise ValueError("is longer than 64 characters")
            if isinstance(v, (int, float)) and not (0 < v <= 2**50):
                raise ValueError("must be between 1 B and 1 PiB")
            return v

    return GpuFile


def _read_table(path: Path) -> Any:
    """The GPU file's contents, parsed as TOML (a ``.toml`` file) or JSON; ConfigError when unreadable."""
    import tomllib

    from kvledger.catalog.jsonload import loads_located
    from kvledger.errors import ConfigError

    try:
        if path.stat().st_size > 1 << 20:
            raise ConfigError(str(path), "a GPU file is a few lines; this one is over 1 MiB")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(str(path), f"not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise ConfigError(str(path), f"cannot read the GPU description: {err.strerror}") from None
    if path.suffix == ".toml":
        try:
            d = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError, ValueError) as err:
            raise ConfigError(str(path), f"invalid TOML: {str(err)[:160]}") from None
    else:
        d = loads_located(text, str(path))
    return d


def gpu_file(path: Path | str) -> GpuSpec:
    """A custom GPU from a small JSON or TOML file (a Path or a path string): name, memory ("79.22GiB"),
    bandwidth_tb_s, bf16_tflops[, fp8_tflops, base, interconnect_gb_s, host_link_gb_s] (links bidirectional, as
    gpus.csv; they override base's; without either and without base the GPU has no link figure, and TP > 1 or
    offloading is refused naming the field).

    Raises:
        InputError: ``path`` is neither a Path nor a string.
        ConfigError: unreadable file, wrong types, missing or out-of-range fields (file, field and allowed range named).
    """
    from pydantic import ValidationError

    from kvledger.errors import ConfigError, InputError
    from kvledger.units import parse_bytes

    if not isinstance(path, (str, Path)):
        raise InputError(f"gpu_file(path): a file path (str or pathlib.Path), got {type(path).__name__}")
    path = Path(path)
    d = _read_table(path)
    if not isinstance(d, dict):
        raise ConfigError(str(path), f"expected a table of fields (name, memory, bandwidth_tb_s, bf16_tflops), got "
                                     f"{type(d).__name__}")
    missing = [k for k in ("memory", "bandwidth_tb_s", "bf16_tflops") if k not in d]
    if missing:
        raise ConfigError(str(path), f"missing {', '.join(missing)}; a GPU file needs name, memory (e.g. \"79.22GiB\" "
                                     f"as CUDA reports it), bandwidth_tb_s, bf16_tflops", field=missing[0])
    try:
        f = _gpu_file_model().model_validate({"name": path.stem[:255] or "custom GPU", **d})
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(x) for x in e["loc"]) or None
        field_names = ("the fields are name, memory, bandwidth_tb_s, bf16_tflops, fp8_tflops, base, "
                       "interconnect_gb_s, host_link_gb_s")
        allowed = _GPU_RANGES.get(str(e["loc"][0]) if e["loc"] else "", field_names)
        raise ConfigError(
            str(path),
            f"{e['msg']} (allowed: {allowed})",
            field=loc,
        ) from None
    base = get_gpu(f.base) if f.base else None
    g = custom_gpu(f.name, parse_bytes(f.memory, what=f"{path}: memory"), f.bandwidth_tb_s * 1e12,
                   f.bf16_tflops * 1e12,
                   f.fp8_tflops * 1e12 if f.fp8_tflops else None, base,
                   flags={"memory": f"{path}: memory", "HBM bandwidth": f"{path}: bandwidth_tb_s",
                          "dense BF16 peak": f"{path}: bf16_tflops"})
    links = {}
    if f.interconnect_gb_s is not None:
        links.update(interconnect="given" if f.interconnect_gb_s else "none",
                     interconnect_bytes_per_s=f.interconnect_gb_s * 1e9)
    if f.host_link_gb_s is not None:
        links.update(host_link_bytes_per_s=f.host_link_gb_s * 1e9, host_link_source=f"GPU file {path}: host_link_gb_s")
    elif base is not None:
        links["host_link_source"] = f"GPU catalog, the GPU file's base {base.name}"
    return replace(g, datasheet_ref=f"GPU file {path}", **links)


_GPU_RANGES = {"name": "1 to 255 characters", "memory": 'a size such as "79.22GiB", 1 MiB to 32 TiB',
               "bandwidth_tb_s": "0 < TB/s ≤ 1000", "bf16_tflops": "0 < TFLOP/s ≤ 1,000,000",
               "fp8_tflops": "0 < TFLOP/s ≤ 1,000,000", "base": "a catalog GPU name",
               "interconnect_gb_s": "0 ≤ GB/s ≤ 100,000 (bidirectional per GPU; 0: no scale-up link)",
               "host_link_gb_s": "0 < GB/s ≤ 100,000 (bidirectional)"}


def resolve_gpu(name_or_path: str, *, memory_bytes: int | None = None, bandwidth_bytes_per_s: float | None = None,
                bf16_flops_per_s: float | None = None) -> GpuSpec:
    """A catalog GPU or a GPU file, with optional overrides (e.g. the device total your own log printed).

    Raises:
        UnknownNameError, ConfigError, InputError: as get_gpu / the file reader / custom_gpu.
    """
    from kvledger.errors import ConfigError
    from kvledger.names import check_name_or_path

    check_name_or_path(name_or_path, "GPU")
    p = Path(name_or_path)
    if p.suffix in (".json", ".toml"):
        try:
            exists = p.exists()
        except OSError as err:
            raise ConfigError(str(p)[:200], f"cannot be checked as a GPU file ({err.strerror})") from None
        if not exists:
            raise ConfigError(str(p), "GPU file not found (a GPU file is a small .json or .toml: name, memory, "
                                      "bandwidth_tb_s, bf16_tflops)")
        g = gpu_file(p)
    else:
        g = get_gpu(name_or_path)
    if memory_bytes is None and bandwidth_bytes_per_s is None and bf16_flops_per_s is None:
        return g
    pick = lambda v, d: d if v is None else v  # noqa: E731 - 0 is a value to check, not "unset"
    checked = custom_gpu(g.name, pick(memory_bytes, g.memory_bytes), pick(bandwidth_bytes_per_s,
                                                                          g.hbm_bandwidth_bytes_per_s),
                         pick(bf16_flops_per_s, g.bf16_flops_per_s), g.fp8_flops_per_s, g,
                         flags={"memory": "--gpu-memory", "HBM bandwidth": "--gpu-bandwidth",
                                "dense BF16 peak": "--gpu-bf16-tflops"})
    given = memory_bytes is not None
    src = "given by the user (--gpu-memory)" if given else g.memory_source
    return replace(g, memory_bytes=checked.memory_bytes, memory_source=src,
                   hbm_bandwidth_bytes_per_s=checked.hbm_bandwidth_bytes_per_s,
                   bf16_flops_per_s=checked.bf16_flops_per_s,
                   memory_low_bytes=checked.memory_bytes if given else g.memory_low_bytes,
                   memory_high_bytes=checked.memory_bytes if given else g.memory_high_bytes,
                   memory_basis="given" if given else g.memory_basis)


def check_device_memory(memory_bytes: int | None, flag: str) -> int | None:
    """``memory_bytes`` itself when no catalog GPU is smaller than it could hold: a device total above the largest
    catalog GPU's (catalog/data/gpus.csv) is refused, since a typo there ("8000GiB") plans terabytes of KV cache.

    Raises:
        InputError: naming the largest catalog GPU and its memory, and the GPU file for a device beyond it.
    """
    if memory_bytes is None:
        return None
    top = max(gpu_catalog().values(), key=lambda g: g.memory_bytes)
    if memory_bytes > top.memory_bytes:
        raise InputError(f"{flag}: {memory_bytes / 2**30:,.2f} GiB is more memory than any GPU holds: the largest in "
                         f"the GPU catalog is the {top.name} with {top.memory_bytes / 2**30:,.2f} GiB "
                         "(catalog/data/gpus.csv). A bare number is GiB, as for every size flag; for a device beyond "
                         "the catalog pass a GPU file (--gpu FILE.json with its memory)")
    return memory_bytes


def datasheet_memory_note(g: GpuSpec, memory_bytes: int, flag: str = "--gpu-memory") -> str | None:
    """Where a device total given for the catalog GPU ``g`` is its datasheet capacity (the "80GB" of an H100 80GB:
    ``memory_gb_marketed`` read as GB, 10^9 B, or as GiB, a bare number) rather than what CUDA reports: the note
    naming both figures, since the plan sizes the KV pool from the given one (an H100's "80GB" is 74.51 GiB, 4.68 GiB
    under the 79.19 GiB CUDA reports); None otherwise (another figure is the user's measurement, taken as given)."""
    if g.gpu_id == "custom" or memory_bytes == g.memory_bytes:
        return None
    gb = g.memory_gb_marketed
    read = next((u for u, b in (("GB (10^9 B)", gb * 1e9), ("GiB (2^30 B)", gb * 2**30))
                 if abs(memory_bytes - b) <= 0.005 * b), None)
    if read is None:
        return None
    d = (memory_bytes - g.memory_bytes) / 2**30
    return (f"{flag} {memory_bytes / 2**30:,.2f} GiB is the {g.name}'s datasheet capacity, {gb:g} GB, read as {read}, "
            f"not what CUDA reports: {g.memory_bytes / 2**30:,.2f} GiB (catalog, what the plan takes without {flag}); "
            f"the plan sizes the KV pool from the figure given ({d:+,.2f} GiB)")
