"""Configuration search (``kvledger search``): which GPU, TP and engine settings serve a model's traffic under its SLOs
at the lowest cost, and how many GPUs.

Public API: :class:`SearchSpec` and :class:`Axes` describe the search, :func:`run_search` runs
it (in process, a process pool or Ray) and returns a :class:`SearchResult` (ledger entries as
plain dicts, ranking, Pareto frontier, API comparison).
"""

from kvledger.analyses.search.csv_table import CSV_COLUMNS, csv_rows
from kvledger.analyses.search.naming import parse_candidate_id
from kvledger.analyses.search.rank import SearchResult
from kvledger.analyses.search.runner import BACKENDS, ray_available, read_ledger, run_search
from kvledger.analyses.search.spec import Axes, Candidate, SearchSpec

__all__ = ["SearchSpec", "Axes", "Candidate", "SearchResult", "run_search", "read_ledger", "parse_candidate_id",
           "csv_rows", "CSV_COLUMNS", "BACKENDS", "ray_available"]
