"""The ``kvledger search --json`` document, as the command prints it and ``kvledger.search`` returns it: the result's
JSON, why there is no winner (``no_winner_reason``: the headline's sentence, null with a winner), the candidates that
could not be evaluated (``failed_candidates``: their ids, empty where none failed; any makes the command exit 1 and
``kvledger.search`` raise, a winner or not), ``volume_given`` where the volume was typed per day or hour (restated as
the month sized and priced, in cost's words; absent otherwise) and, with --offload, the tier variants' summary."""

from __future__ import annotations

from typing import Any

__all__ = ["search_document"]

_REASONS_AT = "each candidate's reason under rejections and candidates"


def search_document(result: Any, variants: list | None) -> dict[str, Any]:
    """``result`` (analyses.search.rank.SearchResult) as ``--json`` prints it; ``variants``: --offload's tier variants
    (None without --offload)."""
    from kvledger.analyses.search.load import volume_given
    from kvledger.analyses.search.offload_axis import offload_summary
    from kvledger.jsonable import whole_bytes
    from kvledger.report.search_answer import no_winner_line

    doc = whole_bytes(result.to_dict())  # byte counts as ints (a model's weights are summed as floats)
    doc["no_winner_reason"] = None if result.ranking else no_winner_line(result, _REASONS_AT)
    doc["failed_candidates"] = [e["id"] for e in result.entries if e["status"] == "error"]
    if given := volume_given(result.spec):  # a volume typed per day or hour, as the month priced
        doc["volume_given"] = given
    if variants is not None:
        doc["offload"] = offload_summary(variants)
    return doc
