"""KV-cache transfer between prefill and decode pools: the link's one-way bandwidth, the time a prompt's KV spends on
it, and the decode side's admission of KV computed elsewhere.

Link bandwidth (per GPU, one direction):

* ``nvlink``: the catalog's scale-up figure (``gpus.csv`` ``scaleup_bw_gb_s_bidir_per_gpu``,
  bidirectional) ÷ 2 — H100 SXM: 900 GB/s ÷ 2 = 450 GB/s;
* ``pcie``: the catalog's host link (``host_bw_gb_s_bidir``) ÷ 2 — H100 SXM, PCIe Gen5 x16:
  128 GB/s ÷ 2 = 64 GB/s;
* a given figure (``"50GB/s"``, ``"25GiB/s"``, ``"400Gbps"``, ``"400Gb/s"``): taken as one direction
  per GPU, as NIC speeds are quoted (a 400 Gb/s NIC moves 50 GB/s each way).

Transfer time of a P-token prompt = per-GPU KV bytes of P tokens ÷ one-way bandwidth + a fixed
per-transfer latency. Each GPU of a TP group sends (or receives) its own shard over its own link
in parallel, so the per-GPU bytes set the time; when the two pools use different TP degrees the
larger per-GPU shard does. Decode side (vLLM v1 KV connectors: ``get_num_new_matched_tokens``
reports external computed tokens that the scheduler allocates blocks for, then counts as
computed): a received request is admitted with all but its newest known token already computed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable

__all__ = ["KVLink", "KVTransfer", "LINKS", "ReceivedKVManager", "link_from_gpu", "parse_link_bandwidth",
           "nic_bytes_per_s", "received_kv_manager", "transfer_from_plans"]

LINKS = {
    "nvlink": "GPU scale-up link (NVLink/NVSwitch, xGMI): catalog scaleup_bw_gb_s_bidir_per_gpu ÷ 2 (one direction)",
    "pcie": "host link (PCIe/C2C): catalog host_bw_gb_s_bidir ÷ 2 (one direction)",
}

_BW = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([KMGT]i?)(B/s|b/s|bps|Bps)\s*$", re.IGNORECASE)
_SCALE = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}


@dataclass(frozen=True)
class KVLink:
    """The link a prompt's KV crosses, per GPU.

    Attributes:
        name: "nvlink", "pcie" or "network".
        bytes_per_s: one-direction bandwidth per GPU, B/s (> 0).
        latency_s: fixed time added to every transfer, s (≥ 0): connector handshake and completion notice.
        source: where ``bytes_per_s`` comes from (catalog row and the halving, or "given").
    """

    __json__ = ("name", ("bytes_per_s_one_way", "bytes_per_s"), "latency_s", "source")
    name: str
    bytes_per_s: float
    latency_s: float = 0.0
    source: str = "given"

    def __post_init__(self) -> None:
        if not (self.bytes_per_s > 0 and self.bytes_per_s < float("inf")):
            raise InputError(f"KV link bandwidth must be a finite number > 0 B/s, got {self.bytes_per_s!r}")
        if not (0.0 <= self.latency_s < float("inf")):
            raise InputError(f"KV transfer latency must be a finite number ≥ 0 s, got {self.latency_s!r}")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def parse_link_bandwidth(text: str, flag: str = "--link") -> float:
    """A network bandwidth, one direction per GPU: ``"50GB/s"`` → 5e10 B/s, ``"400Gbps"``/``"400Gb/s"`` → 5e10 B/s;
    ``flag``: the option named in the error.

    Raises:
        InputError: anything else (a unit is required: B/s or b/s, bps, with k/M/G/T or Ki/Mi/Gi/Ti).
    """
    m = _BW.match(str(text))
    if not m:
        what = "nvlink, pcie, or a bandwidth" if flag == "--link" else "a bandwidth"
        raise InputError(f"{flag}: cannot read {text!r}; use {what} per GPU and direction such as '50GB/s', "
                         "'25GiB/s' or '400Gbps' (bits)")
    value = float(m.group(1)) * _SCALE[m.group(2).lower()]
    value = value / 8 if m.group(3).startswith("b") else value  # lower-case b: bits (b/s, bps); B: bytes
    if value <= 0:
        raise InputError(f"{flag}: bandwidth must be > 0, got {text!r}")
    return value


def nic_bytes_per_s(text: str | None) -> float | None:
    """``--inter-node-link`` (a GPU's NIC for a TP group over nodes) as B/s one direction, None when not given."""
    from kvledger.accounting.settings import BOUNDS

    if text is None:
        return None
    value, top = parse_link_bandwidth(text, "--inter-node-link"), BOUNDS["inter_node_link_bytes_per_s"][2]
    if value > top:  # the plan settings' bound, said in the flag's own units (not the settings field's B/s)
        raise InputError(f"--inter-node-link {text}: {value / 1e9:,.4g} GB/s per GPU and direction is out of range; "
                         f"allowed: up to {top / 1e9:,.0f} GB/s (a NIC is quoted in Gbps: 400Gbps is 50 GB/s)")
    return value


def link_from_gpu(gpu, link: str, latency_s: float = 0.0) -> KVLink:
    """The KV link for ``link`` ("nvlink", "pcie" or a bandwidth) on catalog GPU ``gpu`` (a ``GpuSpec``).

    Raises:
        InputError: the GPU has no such link in the catalog (e.g. NVLink on an L40S), or an unreadable bandwidth.
    """
    key = link.strip().lower()
    if key in ("nvlink", "pcie"):
        bidir = gpu.interconnect_bytes_per_s if key == "nvlink" else gpu.host_link_bytes_per_s
        what = f"{gpu.interconnect} scale-up link" if key == "nvlink" else "host link (PCIe)"
        if not bidir:
            field = "interconnect_gb_s" if key == "nvlink" else "host_link_gb_s"
            where = (f"({gpu.datasheet_ref}: add {field} = <GB/s>, bidirectional per GPU, to the file)"
                     if gpu.datasheet_ref.startswith("GPU file")
                     else f"in the GPU catalog (scale-up: {gpu.interconnect!r})")
            raise InputError(f"{gpu.name} has no {key} bandwidth {where}; use --link pcie or give the network "
                             "bandwidth per GPU, e.g. --link 50GB/s")
        src = (f"{gpu.name} {what}: {bidir / 1e9:,.0f} GB/s bidirectional per GPU (catalog gpus.csv, "
               f"{gpu.datasheet_ref}) ÷ 2 = {bidir / 2e9:,.0f} GB/s one way")
        return KVLink(key, bidir / 2, latency_s, src)
    bw = parse_link_bandwidth(link)
    return KVLink("network", bw, latency_s, f"given: {link} = {bw / 1e9:,.2f} GB/s per GPU, one direction")


@dataclass(frozen=True)
class KVTransfer:
    """How a prompt's KV crosses from a prefill replica to a decode replica.

    Attributes:
        link: the link (one-direction bandwidth per GPU, fixed latency).
        bytes_per_token: per-GPU KV bytes of one prompt token, B/token (used when ``request_bytes`` is None).
        request_bytes: per-GPU bytes of a P-token prompt's KV (windows capped, recurrent state
            included), B; from the memory plans (``transfer_from_plans``). None → ``bytes_per_token × P``.
        serialize: transfers leaving one prefill replica share its link one after another (FIFO in
            first-token order); False → every transfer gets the whole link.
        description: how ``request_bytes`` was derived.
    """

    __json__ = ("link", ("bytes_per_token_per_gpu", "bytes_per_token"), "serialize", ("description", "derivation"))
    link: KVLink
    bytes_per_token: float
    request_bytes: Callable[[int], float] | None = None
    serialize: bool = True
    description: str = ""

    def bytes_for(self, num_prompt_tokens: int) -> float:
        """Per-GPU KV bytes sent for a prompt of ``num_prompt_tokens`` tokens, B."""
        if self.request_bytes is not None:
            return float(self.request_bytes(num_prompt_tokens))
        return self.bytes_per_token * num_prompt_tokens

    def wire_s(self, num_prompt_tokens: int) -> float:
        """Time the prompt's KV occupies the link, s (bytes ÷ one-way bandwidth; latency not included)."""
        return self.bytes_for(num_prompt_tokens) / self.link.bytes_per_s

    @property
    def derivation(self) -> str:
        """``description``, or the per-token rule when none was given."""
        return self.description or f"{self.bytes_per_token:,.0f} B/token per GPU × prompt tokens"

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def transfer_from_plans(prefill_plan, decode_plan, link: KVLink, serialize: bool = True) -> KVTransfer:
    """The transfer for two memory plans (``kvledger.accounting.plan.Plan``) of one model, possibly at different TP.

    Per-GPU bytes of a P-token prompt = max(prefill plan's, decode plan's ``kv.bytes_per_request(P)``): each
    link carries one GPU's shard, and the side with the larger shards sets the time.
    """
    kp, kd = prefill_plan.kv, decode_plan.kv
    per_tok = max(kp.bytes_per_token, kd.bytes_per_token)
    tps = f"TP {kp.tp}" if kp.tp == kd.tp else f"prefill TP {kp.tp} / decode TP {kd.tp}: the larger per-GPU shard"
    desc = (f"KV ledger: {per_tok:,.0f} B/token per GPU ({prefill_plan.model.name}, {kp.kv_cache_dtype}, {tps}) × "
            f"prompt "
            f"tokens ÷ {link.bytes_per_s / 1e9:,.1f} GB/s + {link.latency_s * 1e3:g} ms per transfer")
    if kp.tp == kd.tp:
        fn = kp.bytes_per_request
    else:
        def fn(n: int) -> float:
            return max(kp.bytes_per_request(n), kd.bytes_per_request(n))
    return KVTransfer(link, per_tok, fn, serialize, desc)


class ReceivedKVManager(PagedKVManager):
    """A decode replica's paged KV manager: requests in ``incoming`` arrive with their KV computed elsewhere.

    At such a request's first admission every known token but the newest counts as computed
    (vLLM v1 ``KVConnector.get_num_new_matched_tokens``: external tokens get blocks at
    admission and count as computed), so the scheduler schedules one token for it — a decode
    step for a request whose first token came from the prefill side. Blocks for all of its
    tokens must fit, as for any admission. After a preemption it is recomputed locally, like
    any other request. Prefix caching is off on this side (the whole prompt is transferred).
    """

    def __init__(self, num_gpu_blocks: int, block_size: int, blocks_for_tokens: Callable[[int], int] | None = None,
                 contiguous: bool = False, max_model_len: int = 0) -> None:
        super().__init__(num_gpu_blocks, block_size, False, blocks_for_tokens, contiguous, max_model_len)
        self.incoming: set[int] = set()  # uids whose KV was transferred and that were not admitted yet

    def match(self, req: SimRequest) -> tuple[list[int], int]:
        if req.uid in self.incoming:
            return [], req.num_tokens - 1
        return super().match(req)

    def admit(self, req: SimRequest, hits: list[int], num_new_tokens: int, must_fit_tokens: int,
              reserve_tokens: int = 0) -> bool:
        if req.uid not in self.incoming:
            return super().admit(req, hits, num_new_tokens, must_fit_tokens, reserve_tokens)
        external = req.num_tokens - 1
        if not super().admit(req, [], external + num_new_tokens, must_fit_tokens, reserve_tokens):
            return False
        self.incoming.discard(req.uid)
        req.num_computed_tokens = external
        return True


def received_kv_manager(cfg: EngineConfig) -> ReceivedKVManager:
    """The decode-side KV manager for engine settings ``cfg`` (paged; prefix caching off)."""
    return ReceivedKVManager(cfg.num_gpu_blocks, cfg.block_size, cfg.blocks_for_tokens,
                             contiguous=cfg.kv_allocation == "contiguous", max_model_len=cfg.max_model_len)
