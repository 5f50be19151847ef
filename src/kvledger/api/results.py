"""What the Python API's calls return: the plan with ``plan --json``'s document, a goodput document, the cost ledger's
document, and the rewording
of an error raised under a command's flag names into the call's parameter names."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvledger.errors import KvLedgerError
from kvledger.strict_json import to_strict

if TYPE_CHECKING:
    from kvledger.analyses.serving.sim_tier_report import SimTierReport

__all__ = ["PlanResult", "GoodputResult", "CostResult", "goodput_document", "in_python_terms", "check_ranges",
           "python_words", "python_document"]


@dataclass(frozen=True)
class PlanResult:
    """A memory plan (``plan``: :class:`kvledger.accounting.plan.Plan`) with ``kvledger plan --json``'s document.

    ``fits`` is the command's verdict: False where ``plan`` exits 3 (the weights or one request of max_model_len do
    not fit, SGLang's Mamba state slots serve no request, the engine would refuse to start), and False where
    TensorRT-LLM or SGLang starts but serves only shorter requests than max_model_len (verdict "served_at_lower_len",
    exit 0); ``advice`` says why and what each fix buys."""

    plan: Any
    document: dict[str, Any] = field(repr=False)
    kv_tiers: Any = field(default=None, repr=False)  # the tiers' plan where tier parameters were given, else None

    @property
    def fits(self) -> bool:
        p, startup = self.plan, self.plan.memory.startup
        refused = startup is not None and startup.verdict in ("refuses", "runs_out")
        return bool(p.advice is None or p.advice.verdict == "fits") and not refused

    @property
    def advice(self) -> Any:
        return self.plan.advice

    def to_dict(self) -> dict[str, Any]:
        """``kvledger plan MODEL --gpu GPU … --json`` for the same inputs (a copy: change it freely)."""
        return to_strict(self.document)  # a fresh copy, as --json writes it


@dataclass(frozen=True)
class GoodputResult:
    """Goodput of a simulated run, or with ``target`` the SLO boundary search; ``to_dict()`` is ``kvledger goodput
    --simulate … --json``'s document for the same inputs."""

    document: dict[str, Any] = field(repr=False)
    result: Any = field(default=None, repr=False)  # the ledger's GoodputResult (one run) or the search (``target``)
    #: with a host KV tier: its report (``sim_tier_report.SimTierReport``, the document's ``kv_tiers``); None without
    kv_tiers: SimTierReport | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return to_strict(self.document)  # a fresh copy, as --json writes it


@dataclass(frozen=True)
class CostResult:
    """The self-host-versus-API ledger; ``to_dict()`` is ``kvledger cost … --json``'s document for the same inputs.

    ``report`` is the ledger's CostReport (``ledgers.cost``: the self-hosted and API ledgers, their line items and
    totals); ``capacity`` the SLO-capacity search priced (a simulation's; None for a file or ``at_offered_load``)."""

    document: dict[str, Any] = field(repr=False)
    report: Any = field(default=None, repr=False)
    capacity: Any = field(default=None, repr=False)

    def __repr__(self) -> str:
        """What a notebook cell shows for the result: the answer's first line (``headline[0]``: the verdict, both
        monthly bills and the volume), not an empty ``CostResult()``."""
        head = self.document.get("headline") or [""]
        return f"CostResult({head[0]!r})"

    def to_dict(self) -> dict[str, Any]:
        return to_strict(self.document)  # a fresh copy, as --json writes it


def goodput_document(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """``goodput --json``'s document from its JSON objects: a lone run's object, else ``{"runs": [...]}`` with the
    boundary object's keys (``boundary``, ``probes``, ``simulation``, ``notes``) merged in."""
    objs = list(objs)
    if len(objs) == 1 and "boundary" not in objs[0]:
        return objs[0]
    tail = objs.pop() if objs and "boundary" in objs[-1] else {}
    return {"runs": objs, **tail}


#: command-line flags whose Python parameter is not the flag with underscores
_PARAMS = {"context": "contexts", "policy": "policy", "think-time": "think_time_s",
           "enable-prefix-caching": "enable_prefix_caching", "enable-chunked-prefill": "enable_chunked_prefill"}


#: what makes a flag part of a command line the user would run, kept as the command spells it: in the same clause,
#: after ``kvledger``, ``vllm serve`` or SGLang's launcher, or right after one of kvledger's command names
_COMMAND_LINE = re.compile(r"\bkvledger\b|\bvllm serve\b|\bsglang\b"
                           r"|\b(?:plan|simulate|goodput|cost|search|validate|calibrate|report|disagg|offload|doctor)\s+--")
#: where a clause begins, for :data:`_COMMAND_LINE`
_CLAUSE = re.compile(r"[(;:,—]")


def python_words(text: str, params: frozenset[str]) -> str:
    """``text`` with each flag of one of ``params`` (``--max-model-len``) named as the parameter (``max_model_len``),
    but an engine's own quoted words and a command line (:data:`_COMMAND_LINE`) kept as written."""
    def word(m: re.Match) -> str:  # the call's own spelling where _PARAMS's is not one of its parameters
        clause = _CLAUSE.split(m.string[:m.start()])[-1]
        if _COMMAND_LINE.search(clause):
            return m.group(0)
        names = (_PARAMS.get(m.group(1)), m.group(1).replace("-", "_"))
        return next((name for name in names if name in params), m.group(0))

    parts = text.split('"')  # an engine's own words, quoted, keep its flags (vLLM's argparse line)
    quoted = len(parts) % 2 == 1
    return '"'.join(p if quoted and i % 2 else re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)", word, p)
                    for i, p in enumerate(parts))


#: the keys whose block is a typed record the call also returns (``PlanResult.kv_tiers``), kept equal to its
#: ``to_dict()``
_RECORDS = frozenset({"kv_tiers"})


def python_document(doc: Any, params: frozenset[str]) -> Any:
    """``doc`` (a command's ``--json`` document, or any part of it) with its prose in the call's terms
    (:func:`python_words` on every string that names a flag; a typed record's block, :data:`_RECORDS`, as it is); a
    new document, ``doc`` left as it was."""
    if isinstance(doc, dict):
        return {k: v if k in _RECORDS else python_document(v, params) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return type(doc)(python_document(v, params) for v in doc)
    return python_words(doc, params) if isinstance(doc, str) and "--" in doc else doc


@contextmanager
def in_python_terms(call: str, params: frozenset[str]) -> Iterator[None]:
    """Within the block, a KvLedgerError that names a flag of one of ``params`` (``--max-model-len``) names the
    parameter instead (``max_model_len``), with the call in front: the same error class and exit code."""
    try:
        yield
    except KvLedgerError as err:
        err.args = (f"kvledger.{call}: {python_words(str(err), params)}",)
        if isinstance(payload := getattr(err, "payload", None), dict):  # NoAnswerError's document, as a result's
            err.payload = python_document(payload, params)
        raise


def check_ranges(command: str, values: dict[str, Any]) -> None:
    """Check each numeric value in ``values`` (a call's arguments, by parameter name; None: not given) against the
    command's range (``kvledger.ranges``, the table the CLI checks its flags against), the error naming the parameter:
    "seed -1 is out of range; allowed: [0, …]".

    Raises:
        InputError: a value out of its range (several reported together).
    """
    from kvledger.ranges import check_options

    check_options(command, values, {name: name for name in values})
