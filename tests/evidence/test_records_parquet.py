"""kvledger's records file in Parquet: same records back, damaged values named, goodput identical to the JSON file."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvledger.errors import FormatError
from kvledger.evidence import read_run, write_records
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords


def _run() -> RunRecords:
    recs = [RequestRecord("a", 0.0, 5, 3, 0.1, 0.3, np.array([0.1, 0.2, 0.3]), 2, 0),
            RequestRecord("b", 0.5, 4, 2, 0.9, 1.0, np.array([0.9, 1.0]), 0, 1),
            RequestRecord("c", 0.7, 4, 0, None, 0.7, None, None, None, "refused")]
    return RunRecords(recs, RunMetadata("simulator", "simulator", request_rate=math.inf, extra={"gpu_id": "h100"}))


def test_round_trip_keeps_every_field(tmp_path):
    run = _run()
    back = read_run(write_records(run, tmp_path / "r.parquet"))
    assert back.records == run.records
    assert back.metadata.request_rate == math.inf and back.metadata.extra["gpu_id"] == "h100"


def test_goodput_of_the_parquet_file_equals_that_of_the_json_file(tmp_path):
    run = _run()
    # a: TTFT 0.1, max gap 0.1 → good; b: TTFT 0.4 > 0.3 → not good; c failed. 1 of 3 good under ttft ≤ 0.3 s, itl ≤
    # 0.15 s.
    slo = parse_slo("ttft=300ms,itl=150ms")
    a = goodput(read_run(write_records(run, tmp_path / "r.json")), slo)
    b = goodput(read_run(write_records(run, tmp_path / "r.parquet")), slo)
    assert a.num_good == b.num_good == 1 and a.attainment == b.attainment == pytest.approx(1 / 3)


def _damaged(tmp_path, column: str, values) -> str:
    p = tmp_path / "r.parquet"
    write_records(_run(), p)
    table = pq.read_table(p)
    i = table.column_names.index(column)
    table = table.set_column(i, column, pa.array(values, table.schema.field(column).type))
    pq.write_table(table, p)
    return str(p)


@pytest.mark.parametrize("column, values, where", [
    ("arrival_s", [0.0, float("nan"), 0.7], "row 1, column 'arrival_s'"),
    ("finish_s", [0.3, 0.4, 0.7], "row 1, column 'finish_s'"),  # finish 0.4 before arrival 0.5
    ("chunk_times_s", [[0.1, 0.3, 0.2], [0.9, 1.0], None], "row 0, column 'chunk_times_s'"),
    ("num_output_tokens", [3, -2, 0], "column 'num_output_tokens'"),
])
def test_damaged_values_name_row_and_column(tmp_path, column, values, where):
    path = _damaged(tmp_path, column, values)
    with pytest.raises(FormatError) as err:
        read_run(path)
    assert path in str(err.value) and where in str(err.value)


def test_a_foreign_parquet_file_is_refused_clearly(tmp_path):
    p = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), p)
    with pytest.raises(FormatError, match="not a kvledger records file"):
        read_run(p)
