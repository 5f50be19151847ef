"""What ``/api/plan`` and ``/api/serving`` take: the request bodies (strict: a number must be a JSON number, never a
boolean or a numeric string, and an unknown field is refused, not dropped), the ranges their numbers are checked
against (``kvledger.ranges``, the CLI's table, named by the request's field) and the engine the simulator runs.

The page (``data/webapp.html``) sends numbers as numbers and only these fields.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kvledger.ledgers.host_bill import DEFAULT_TEAM_CAPABILITY

__all__ = ["PlanRequest", "ServingRequest", "SERVING_NUM_REQUESTS", "ENGINE_FIELDS", "TRAFFIC_FIELDS",
           "WORKLOAD_FIELDS",
           "web_client_latency", "as_typed",
           "check_plan_numbers", "given_settings", "check_serving_numbers", "check_traffic", "simulator_engine"]

#: the serving request's fields that are ``ReportRequest``'s (and ``kvledger cost``'s flags) by the same name: the API's
#: batch and prompt-cache mix, the volume as input and output tokens, its peak, the rental provider, the user's own GPU
#: price (USD per GPU-hour, for a GPU without a price row or a negotiated rate), the prompt-cache write share and the
#: people line (--team-capability, --engineer-months-per-month, --engineer-usd-per-month)
TRAFFIC_FIELDS = ("batch_share", "cache_hit_rate", "peak_to_mean", "gpu_provider", "monthly_input_tokens",
                  "monthly_output_tokens", "gpu_usd_per_hour", "cache_write_rate", "team_capability",
                  "engineer_months_per_month", "engineer_usd_per_month")
_TEXT = ("gpu_provider", "team_capability")  # the traffic fields that are not numbers
_SPLIT = ("monthly_input_tokens", "monthly_output_tokens")  # the volume as tokens of each kind: both or neither
#: the serving request's synthetic workload, ``kvledger report``'s and ``cost``'s flags by the same name (with these the
#: trace is not read): checked as the CLI checks them, by ``decision_data`` (``report_workload.report_synthetic``)
WORKLOAD_FIELDS = ("prompt_lengths", "output_lengths", "shared_prefix_tokens", "document_pool")
#: both requests' engine settings, ``kvledger plan``'s, ``report``'s and ``cost --simulate``'s flags by the same name
#: (quantization: ``-q``/``--quantization``)
ENGINE_FIELDS = ("engine_version", "gpu_memory_utilization", "max_num_seqs", "quantization", "mem_fraction_static")
SERVING_NUM_REQUESTS = 2000  # the CLI's: `kvledger report` and `cost --simulate` simulate 2,000 requests per probe
_SIMULATED = {"vllm": None, "sglang": "sglang"}  # engine → the simulator's --policy (None: its default, vLLM's rule)


def web_client_latency(text: str | None) -> Any:
    """``--client-latency`` read as the CLI's flag reads it (a duration with its unit, [0, 10] s; not ``profile:``,
    which names a file the app does not open): a ``ClientLatency``, or None when empty or zero."""
    from kvledger.analyses.serving.client_latency import FLAG, client_latency_of
    from kvledger.errors import InputError
    from kvledger.ranges import check_options

    if text is None or not text.strip():
        return None
    if text.strip().startswith("profile:"):
        raise InputError("takes a duration such as 21ms in the web app; a profile's fitted latency "
                         "(profile:FILE.json) is read by the command line (simulate, validate, search)")
    check_options("simulate", {"client_latency": text.strip()}, {"client_latency": FLAG})
    return client_latency_of(text.strip())


def as_typed(value: float) -> str:
    """A JSON number as the request wrote it, for the volume parser and its errors: a whole one without the ".0" the
    strict float field adds (-5, not -5.0; 200000000000, not 200000000000.0), a fraction as Python writes it."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _fields(values: dict[str, Any]) -> dict[str, str]:
    """Each value's name in an error: the request's field (the CLI's message, with the field for the flag)."""
    return {k: k for k in values}


def given_settings(settings: dict[str, Any] | None) -> dict[str, Any]:
    """The engine settings (``ENGINE_FIELDS``) given: empty ones dropped, ``quantization`` lower-cased as the CLI's
    ``-q`` reads it."""
    return {k: v.strip().lower() if k == "quantization" else v
            for k, v in (settings or {}).items() if v is not None and v != ""}


def check_plan_numbers(tp: int, gpu_memory_utilization: float | None, max_num_seqs: int | None = None,
                       more: dict[str, Any] | None = None) -> None:
    """``kvledger plan``'s ranges for the plan's numbers (``more``: others by field name, mem_fraction_static,
    data_parallel_size, ep_size; a true/false one is no number). Raises InputError: one out of range, in the CLI's
    words."""
    from kvledger.ranges import check_options

    values = {"tp": tp, "gpu_memory_utilization": gpu_memory_utilization, "max_num_seqs": max_num_seqs,
              **{k: v for k, v in (more or {}).items() if not isinstance(v, bool)}}
    check_options("plan", values, _fields(values))


def check_serving_numbers(tp: int, utilization: float | None, num_requests: int,
                          monthly_tokens: float | None, engine: dict[str, Any] | None = None) -> None:
    """The serving request's numbers: requests per simulation in the app's bound ([50, 5,000]), the volume read by
    ``cost --monthly-tokens``'s own parser (a volume of 0 or less prices nothing), the others in ``kvledger cost
    --simulate``'s ranges (``engine``: the engine settings' numbers, gpu_memory_utilization and max_num_seqs, by
    name). Raises InputError: one out of range, in the CLI's words."""
    from kvledger.ledgers.volume_rate import volume_option as count_option
    from kvledger.ranges import check_options, range_for

    range_for("ui", "num_requests").check("requests per simulation", num_requests)
    if monthly_tokens is not None:
        count_option("monthly_tokens", positive=True)(as_typed(monthly_tokens))
    numbers = {k: v for k, v in (engine or {}).items()  # the version and -q: text, the plan's parsers read them
               if k not in ("engine_version", "quantization") and not isinstance(v, bool)}
    values = {"tp": tp, "utilization": utilization, "monthly_tokens": monthly_tokens, **numbers}
    check_options("cost", values, _fields(values))


def check_traffic(traffic: dict[str, Any], monthly_tokens: float | None) -> None:
    """The traffic fields (``TRAFFIC_FIELDS``) as ``kvledger cost`` checks its flags: the people line by cost's own
    check (``host_bill.people_cost``: the team capability, the engineer-months and their price in range), each other
    number in cost's range, a volume's token counts read by its parser, input and output tokens together and not with
    ``monthly_tokens``, a peak only with a volume to size for. Raises InputError naming the field."""
    from kvledger.errors import InputError
    from kvledger.ledgers.host_bill import people_cost
    from kvledger.ledgers.volume_rate import volume_option as count_option
    from kvledger.ranges import check_options

    people = ("engineer_months_per_month", "engineer_usd_per_month")  # checked by cost's people_cost, its messages
    people_cost(traffic.get("team_capability", DEFAULT_TEAM_CAPABILITY), *(traffic.get(k) for k in people))
    numbers = {k: v for k, v in traffic.items() if k not in (*_TEXT, *people)}
    for k in _SPLIT:
        if numbers.get(k) is not None:
            count_option(k)(as_typed(numbers[k]))
    check_options("cost", numbers, _fields(numbers))
    split = [k for k in _SPLIT if numbers.get(k) is not None]
    if len(split) == 1:
        raise InputError(f"{split[0]} is given without {({*_SPLIT} - {split[0]}).pop()}: the volume as "
                         "tokens of each kind takes both (or give monthly_tokens, split as in the run)")
    if split and monthly_tokens is not None:
        raise InputError("monthly_tokens and monthly_input_tokens/monthly_output_tokens are two volumes: give one "
                         "(empty monthly_tokens to size for the input and output tokens)")
    if numbers.get("peak_to_mean", 1.0) != 1.0 and not split and monthly_tokens is None:
        raise InputError(f"peak_to_mean {numbers['peak_to_mean']:g} sizes replicas for the busiest hour of a monthly "
                         "volume: give one (monthly_tokens, or monthly_input_tokens with monthly_output_tokens), or "
                         "set peak_to_mean to 1")


def simulator_engine(engine: str) -> str | None:
    """The simulator's ``--policy`` for the engine field: None (vLLM's rule, its default) or ``"sglang"``.

    Raises:
        InputError: an engine the serving simulator has no rules for (TensorRT-LLM: the plan only).
    """
    from kvledger.errors import InputError

    key = engine.strip().lower()
    if key not in _SIMULATED:
        raise InputError(f"engine {engine[:40]!r}: capacity and cost are simulated for vllm or sglang only (`kvledger "
                         "simulate --policy vllm|sglang`); the simulator has no rules for it, so the serving panel "
                         "does not apply (the KV-cache plan does)")
    return _SIMULATED[key]


PATH_CHARS = 4096  # a name or a path (model, GPU, trace): the longest path the names' check reads (kvledger.names)
TEXT_CHARS = 256  # any other text field: an SLO, an API row, a token count, a dtype, a duration (each far shorter)


def _text(default: Any = ..., limit: int = TEXT_CHARS) -> Any:
    """A text field (required when ``default`` is ``...``) of at most ``limit`` characters: a longer one is refused by
    its length, never echoed whole in the error."""
    return Field(default, max_length=limit)


class DeploymentRequest(BaseModel):
    """The fields both bodies share: what is deployed and how (strict types, no unknown field, bounded text)."""

    model_config = ConfigDict(strict=True, extra="forbid")
    model: str = _text(limit=PATH_CHARS)
    gpu: str = _text(limit=PATH_CHARS)
    engine: str = _text("vllm")
    tp: int = 1
    max_model_len: str | None = _text(None)
    kv_cache_dtype: str = _text("auto")
    wddm: bool = False
    request_id: int | None = None
    # the engine settings `plan`, `report` and `cost --simulate` take as --engine-version, --gpu-memory-utilization and
    # --max-num-seqs: checked as those flags are (kvledger.ranges; the version by the engine's own parser, in the plan)
    engine_version: str | None = _text(None)
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    quantization: str | None = _text(None)  # vLLM's -q/--quantization: fp8 (bitsandbytes to 0.27) on load
    mem_fraction_static: float | None = None  # SGLang's --mem-fraction-static (gpu_memory_utilization is vLLM's)
    # the parallelism beyond TP (webapp_parallel): vLLM's --data-parallel-size / SGLang's --dp-size, SGLang's
    # --enable-dp-attention and --ep-size, checked as plan and report check those flags
    data_parallel_size: int | None = None
    enable_dp_attention: bool = False
    attn_dp_size: int | None = None  # SGLang 0.5.22+'s --attn-dp-size N: --enable-dp-attention --dp-size N
    ep_size: int | None = None
    enable_expert_parallel: bool = False  # vLLM's --enable-expert-parallel (a MoE model's DP ranks need it)

    @field_validator("max_model_len", mode="before")
    @classmethod
    def _token_count(cls, v: Any) -> Any:
        """A token count as the CLI's ``--max-model-len`` takes it: text (``32K``) or a JSON whole number (8192, read
        as its digits); a boolean or a fraction is refused as this field's error."""
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        if v is None or isinstance(v, str):
            return v
        raise ValueError("must be a token count: text such as '32K' or a whole number such as 8192")


class PlanRequest(DeploymentRequest):
    """``/api/plan``'s body; ``kv_offloading_size``: vLLM's ``--kv-offloading-size``, a host KV tier in GiB summed
    over the TP ranks, sized by the plan (``webapp_tiers``)."""

    kv_offloading_size: float | None = None


class ServingRequest(DeploymentRequest):
    """``/api/serving``'s body."""

    slo: str = _text()
    api: str | None = _text(None)
    trace: str = _text("azure-conv", PATH_CHARS)
    prompt_lengths: str | None = _text(None)
    output_lengths: str | None = _text(None)
    shared_prefix_tokens: int | None = None
    document_pool: str | None = _text(None)  # --document-pool K:L[:zipf=S]: a drawn document before each question
    kv_offloading_size: float | None = None  # the plan panel's host KV tier, GiB: run at the capacity (webapp_tiers)
    utilization: float | None = None
    num_requests: int = SERVING_NUM_REQUESTS
    monthly_tokens: float | None = None
    monthly_input_tokens: float | None = None
    monthly_output_tokens: float | None = None
    peak_to_mean: float = 1.0
    batch_share: float = 0.0
    cache_hit_rate: float = 0.0
    gpu_provider: str | None = _text(None)
    gpu_usd_per_hour: float | None = None  # --gpu-usd-per-hour's one number: the app prices the one GPU it plans
    cache_write_rate: float = 0.0
    team_capability: str = _text(DEFAULT_TEAM_CAPABILITY)  # cost's --team-capability: experienced, some or none
    engineer_months_per_month: float | None = None
    engineer_usd_per_month: float | None = None
    client_latency: str | None = _text(None)

    @field_validator("monthly_tokens", "monthly_input_tokens", "monthly_output_tokens", mode="wrap")
    @classmethod
    def _volume(cls, v: Any, handler: Any, info: Any) -> Any:
        """A volume as ``cost --monthly-tokens`` takes it: a JSON number, or text read by the CLI's own parser
        (``"1.5B"`` = 1.5 × 10⁹: K, M, B, T powers of 1000; ``"3e8"``; ``"100M/day"`` a rate, kept as typed so the
        answer restates it: a wrap validator, since the strict float would make it a plain one), refused as this
        field's error; a boolean is refused by the strict float."""
        if not isinstance(v, str):
            return handler(v)
        from kvledger.errors import InputError
        from kvledger.ledgers.volume_rate import volume_option as count_option
        from kvledger.report.webapp_words import in_app_words

        try:  # more than 0 for monthly_tokens only, as the CLI and the number check: 0 input tokens is a split
            return count_option(info.field_name, positive=info.field_name == "monthly_tokens")(v)
        except InputError as err:  # in the app's words, as the number's error ("empty the volume field")
            raise ValueError(in_app_words(str(err).removeprefix(f"{info.field_name}: "))) from None

    @field_validator("client_latency")
    @classmethod
    def _duration(cls, v: str | None) -> str | None:
        """``--client-latency``'s rule (a duration with its unit, [0, 10] s), refused as this field's error."""
        import re

        from kvledger.errors import InputError

        try:
            got = web_client_latency(v)
        except InputError as err:
            raise ValueError(re.sub(r"^--client-latency:? ", "", str(err))) from None
        return None if got is None else v.strip()
