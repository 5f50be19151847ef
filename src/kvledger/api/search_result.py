"""What ``kvledger.search`` returns: ``SearchDocument``, the command's ``--json`` document (``to_dict()``, and read as a
mapping: ``doc["winner"]``) with the search's typed records beside it: the spec searched, the session workload, the
--offload tier variants."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvledger.strict_json import to_strict

if TYPE_CHECKING:
    from kvledger.analyses.search.offload_report import OffloadVariant
    from kvledger.analyses.search.spec import SearchSpec
    from kvledger.analyses.serving.session_spec import SessionSpec

__all__ = ["SearchDocument"]


@dataclass(frozen=True, eq=False)
class SearchDocument(Mapping[str, Any]):
    """``kvledger search … --json``'s document for the same inputs (``to_dict()``; its keys read directly, as the dict
    the call returned before: ``doc["winner"]``, ``doc["ranking"]``).

    Attributes:
        document: the ``--json`` document (read it through ``to_dict()``, a strict-JSON copy).
        result: the search's result (``analyses.search.rank.SearchResult``: the ledger entries, ranking, frontiers).
        offload: with ``offload``, one ``OffloadVariant`` per tier variant (the document's ``offload`` block, typed:
            capacities in req/s, prices in USD/GiB-month and USD/month); None without it.
    """

    document: dict[str, Any] = field(repr=False)
    result: Any = field(default=None, repr=False)
    offload: tuple[OffloadVariant, ...] | None = None

    @property
    def spec(self) -> SearchSpec:
        """What was searched (``SearchSpec``: the model, SLO, workload, load, engine and pricing settings)."""
        return self.result.spec

    @property
    def sessions(self) -> SessionSpec | None:
        """The session workload (``workload``: ``SessionSpec``, the preset, sessions per probe and their context
        cap; the document's ``spec.synthetic``); None for a trace or synthetic requests."""
        from kvledger.analyses.serving.session_spec import SessionSpec

        got = self.result.spec.synthetic
        return got if isinstance(got, SessionSpec) else None

    def __getitem__(self, key: str) -> Any:
        return self.document[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.document)

    def __len__(self) -> int:
        return len(self.document)

    def to_dict(self) -> dict[str, Any]:
        """``kvledger search … --json`` for the same inputs (a copy: change it freely)."""
        return to_strict(self.document)
