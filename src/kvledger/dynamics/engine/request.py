"""The request specification every workload source produces and the simulator consumes.

A trace row, a synthetic draw or a closed-loop user's next turn all become a
``RequestSpec``. Prompt *content* is described only as far as prefix caching needs:
a sequence of shared segment ids, each standing for ``segment_tokens`` tokens of
identical text; the rest of the prompt is unique to the request.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RequestSpec", "MAX_ARRIVAL_S", "ARRIVAL_RULE", "plain_spec"]

# Latest arrival the simulator takes, s (about 31.7 years): a float64 time there still resolves 1.2e-7 s, far below
# an engine step; at 1e13 s it resolves 2 ms and step gaps (ITL) would come out wrong.
MAX_ARRIVAL_S = 1e9
ARRIVAL_RULE = "arrival_s must be a number in [0, 1e9] s (about 31.7 years; float64 times lose step resolution beyond)"


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request to serve.

    Attributes:
        request_id: unique within the workload.
        arrival_s: arrival time at the server, s (≥ 0; ties keep workload order).
        num_prompt_tokens: prompt length, tokens (≥ 1).
        num_output_tokens: tokens the request will generate (EOS ignored, as benchmarks do), tokens (≥ 1).
        prefix_segments: ids of the prompt's leading segments, in order; two requests whose
            first k ids are equal share their first ``k × segment_tokens`` prompt tokens
            (Mooncake ``hash_ids`` are such ids with ``segment_tokens = 512``). Tokens beyond
            the listed segments, and any trailing partial segment, are unique to the request.
            Empty: nothing shareable.
        segment_tokens: tokens per segment id, tokens (≥ 1).
        client_id: the client or tenant that sent it, if the source says (ServeGen, routing tests).
        output_segments: ids of the segments that continue ``prefix_segments`` through the request's output (whole
            segments inside prompt + output), when a later request's prompt repeats this one's decoded tokens (a
            session's next turn); only used when ``prefix_segments`` covers every whole segment of a prompt of at least
            one segment.
    """

    request_id: str
    arrival_s: float
    num_prompt_tokens: int
    num_output_tokens: int
    prefix_segments: tuple[int, ...] = ()
    segment_tokens: int = 512
    client_id: str | None = None
    output_segments: tuple[int, ...] = ()

    @property
    def num_shareable_tokens(self) -> int:
        """Prompt tokens covered by complete listed segments, tokens."""
        return min(len(self.prefix_segments) * self.segment_tokens,
                   (self.num_prompt_tokens // self.segment_tokens) * self.segment_tokens)

    @property
    def stream_segments(self) -> tuple[int, ...]:
        """The whole segments of prompt then output that a later request can share: the prompt's listed ones, then
        ``output_segments`` when the listed ones cover the prompt's whole segments (else the chain breaks there)."""
        S = self.segment_tokens
        segs = self.prefix_segments[: self.num_shareable_tokens // S]
        if self.output_segments and segs and len(segs) == self.num_prompt_tokens // S:
            return segs + self.output_segments[: (self.num_prompt_tokens + self.num_output_tokens) // S - len(segs)]
        return segs


_new = object.__new__
_SET = tuple(RequestSpec.__dict__[f].__set__ for f in ("request_id", "arrival_s", "num_prompt_tokens",
                                                       "num_output_tokens", "prefix_segments", "segment_tokens",
                                                       "client_id", "output_segments"))


def plain_spec(request_id: str, arrival_s: float, num_prompt_tokens: int, num_output_tokens: int) -> RequestSpec:
    """``RequestSpec(request_id, arrival_s, num_prompt_tokens, num_output_tokens)`` (no segments, no client, no output
    segments): the same object, its slots filled directly rather than by the frozen dataclass's
    ``object.__setattr__`` per field (half the time; a columnar workload builds one per request delivered)."""
    s = _new(RequestSpec)
    a, b, c, d, e, f, g, h = _SET
    a(s, request_id)
    b(s, arrival_s)
    c(s, num_prompt_tokens)
    d(s, num_output_tokens)
    e(s, ())
    f(s, 512)
    g(s, None)
    h(s, ())
    return s
