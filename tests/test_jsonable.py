"""``kvledger.jsonable.to_jsonable``: the one serializer the records' ``to_dict``s are built on."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from kvledger.accounting.memory import Deduction
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.items import Ledger, LineItem
from kvledger.strict_json import dumps


class Kind(enum.Enum):
    FULL = "full_attention"


class Settings(BaseModel):
    tp: int = 2


@dataclass(frozen=True)
class Row:
    name: str
    sizes: tuple[int, ...]
    kind: Kind
    count: object  # a numpy scalar in the test
    settings: Settings
    deduction: Deduction  # has its own to_dict (adds "gib")
    extra: dict


def test_walks_fields_in_order_and_nested_to_dicts():
    row = Row("x", (16, 32), Kind.FULL, np.int64(7), Settings(), Deduction("weights", 2 * 2**30, "computed"),
              {"rate": np.float64(0.5)})
    d = to_jsonable(row)
    assert list(d) == ["name", "sizes", "kind", "count", "settings", "deduction", "extra"]
    assert d["sizes"] == [16, 32] and d["kind"] == "full_attention" and d["settings"] == {"tp": 2}
    assert type(d["count"]) is int and d["count"] == 7 and type(d["extra"]["rate"]) is float
    # 2 GiB = 2 × 2^30 B: the nested Deduction's own to_dict adds gib = 2.0 and its range (an exact term: low = high =
    # bytes, no range source)
    assert d["deduction"] == {"name": "weights", "bytes": 2 * 2**30, "gib": 2.0, "low_bytes": 2 * 2**30,
                              "high_bytes": 2 * 2**30, "source": "computed", "range_source": ""}
    assert json.loads(dumps(d)) == d
    assert list(to_jsonable(row, exclude=("settings", "extra"))) == ["name", "sizes", "kind", "count", "deduction"]


def test_ledger_adds_its_total_after_its_fields():
    # 10 GPU-hours × $2.5 = $25; 3 Mtok × $2 = $6; total $31
    led = Ledger("self-host", "month", [LineItem("GPU rental", "GPU-hour", 10, 2.5, "table", "2026-01"),
                                        LineItem("API", "Mtok", 3, 2.0, "table", "2026-01")])
    d = led.to_dict()
    assert list(d) == ["name", "per", "items", "total_usd"] and d["total_usd"] == 31.0
    assert [i["amount_usd"] for i in d["items"]] == [25.0, 6.0]


@dataclass
class Inner:
    usd: float


@dataclass
class Declared:
    """A record whose JSON renames, reorders, computes and reads through a nested object (``__json__``)."""

    __json__ = ("b", ("first", "a"), ("inner_usd", "inner.usd"), "double", ("text", "describe"))
    a: int
    b: str
    inner: Inner
    hidden: object = None  # not declared, so not written

    @property
    def double(self) -> int:
        return 2 * self.a

    def describe(self) -> str:
        return f"{self.b}={self.a}"


def test_declared_keys_give_order_names_and_computed_values():
    # a = 3: double = 6, describe() = "x=3"; inner.usd read through the nested object; hidden left out
    d = to_jsonable(Declared(3, "x", Inner(1.5), hidden=object()))
    assert list(d.items()) == [("b", "x"), ("first", 3), ("inner_usd", 1.5), ("double", 6), ("text", "x=3")]
    assert to_jsonable(Declared(3, "x", Inner(1.5)), exclude=("text",)) == {"b": "x", "first": 3, "inner_usd": 1.5,
                                                                             "double": 6}
    assert to_jsonable([Declared(1, "y", Inner(0.0))])[0]["text"] == "y=1"  # nested: the declaration still applies


@dataclass
class Optional_:
    __json_optional__ = ("sweep",)
    kind: str
    sweep: dict | None = None
    notes: list | None = None  # not optional: written as null


def test_optional_keys_are_left_out_while_none():
    assert to_jsonable(Optional_("a")) == {"kind": "a", "notes": None}
    assert list(to_jsonable(Optional_("a", {"n": 1}, []))) == ["kind", "sweep", "notes"]


@dataclass
class Spread:
    __json__ = ("summary", "**extra", "records")
    records: list
    summary: int
    extra: dict


def test_spread_entry_writes_a_dicts_keys_in_its_place():
    # "**extra": its keys after summary and before records; an extra key named like a field replaces it in place
    d = to_jsonable(Spread([1], 2, {"cost_model": "x", "num_replicas": 3}))
    assert list(d.items()) == [("summary", 2), ("cost_model", "x"), ("num_replicas", 3), ("records", [1])]
    assert list(to_jsonable(Spread([1], 2, {"summary": 5}), exclude=("records",)).items()) == [("summary", 5)]


class _Doc:
    """A result record: its document is its to_dict(), its printed form is not JSON."""

    def __repr__(self) -> str:
        return "<_Doc>"

    def to_dict(self) -> dict:
        return {"usd_per_month": 1742.0210459999998, "rate_req_per_s": float("inf")}


def test_strict_dumps_writes_a_result_object_as_its_document_not_its_printed_form():
    # a SearchDocument-like object (to_dict) nested in a list: its keys come out, the monthly dollar figure rounded to
    # the cent (1742.0210459999998 → 1742.02) and the infinity as "inf", as for a plain dict
    from types import MappingProxyType

    assert json.loads(dumps([_Doc()])) == [{"usd_per_month": 1742.02, "rate_req_per_s": "inf"}]
    # a read-only mapping (not a dict) is written as its items
    assert json.loads(dumps({"a": MappingProxyType({"n": 1})})) == {"a": {"n": 1}}
