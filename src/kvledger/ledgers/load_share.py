"""The good share at the load a replica carries for a monthly volume, and the workload's token means that split the
volume.

A replica sized on its SLO capacity C for a volume carries its share of the volume's mean rate, r = mean ÷ replicas,
usually far below C (the Azure conversation trace at 3B tokens a month: 0.86 req/s against C = 19.75 on one H100). The
share of requests within the SLO at r is not the one measured at C: a queue that builds near C is absent at r, so nearly
every request meets the SLO there. ``LoadShare`` holds a run of the same workload and seed at r (simulated by the
analyses layer, ``analyses/serving/load_run.py``): the per-token ledgers then count r × its good tokens per request as
one replica's good tokens per second, and the volume's good requests are its requests × that run's share within the SLO.

The monthly token volume is split between input and output by the means of all the completed requests of the run
priced (the workload the user sends), not of its good requests only: requests that miss the SLO are sent, and billed
on the API, all the same, and they are not a random sample of the workload (long prompts miss a TTFT limit first).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

__all__ = ["LoadShare", "load_share_from", "run_seed"]


@dataclass(frozen=True, slots=True)
class LoadShare:
    """A run of the priced workload at the load one replica carries for the volume.

    Attributes:
        rate_req_per_s: the offered rate of the run, the volume's mean rate ÷ replicas, req/s per replica.
        seed: the workload's seed (the same as the capacity search's), None where the run does not state one.
        num_requests: requests in the run.
        num_good: those within the SLO.
        good_input_tokens / good_output_tokens: prompt / output tokens of its good requests, tokens.
        completed_input_tokens / completed_output_tokens: the same over its completed requests, tokens.
        simulated_rate_req_per_s: the rate the run was simulated at where the volume's is too low for the simulator's
            clock (``analyses.serving.load_run.lowest_rate``: requests that far apart each meet an idle replica), else
            None; the good tokens per second are still counted at ``rate_req_per_s``.
        unit: what the rate is per in words: a replica, or a deployment unit of ``--replicas N`` engines.
    """

    rate_req_per_s: float
    seed: int | None
    num_requests: int
    num_good: int
    good_input_tokens: float
    good_output_tokens: float
    completed_input_tokens: float
    completed_output_tokens: float
    simulated_rate_req_per_s: float | None = None
    unit: str = "replica"

    @property
    def attainment(self) -> float:
        """Share of the run's requests within the SLO."""
        return self.num_good / self.num_requests

    def tok_per_s(self, kind: str) -> float:
        """Good ``kind`` ("input", "output") tokens per second one replica serves at this load: the rate × the run's
        good tokens per request offered."""
        good = self.good_input_tokens if kind == "input" else self.good_output_tokens
        return self.rate_req_per_s * good / self.num_requests

    def as_throughput(self) -> LoadShare:
        """The same load counting every completed request (the sticker price's throughput)."""
        return replace(self, num_good=self.num_requests, good_input_tokens=self.completed_input_tokens,
                       good_output_tokens=self.completed_output_tokens)

    def words(self) -> str:
        """Which run, in words: rate and seed."""
        seed = "workload" if self.seed is None else f"workload and seed ({self.seed})"
        if self.simulated_rate_req_per_s is not None:
            return (f"a run of the same {seed} at {self.simulated_rate_req_per_s:,.4g} req/s, the lowest rate whose "
                    f"{self.num_requests:,} arrivals fit the simulator's clock, standing for the volume's mean load "
                    f"per {self.unit}, {self.rate_req_per_s:,.4g} req/s (that far apart, each request meets an idle "
                    "replica at either rate)")
        return f"a run of the same {seed} at {self.rate_req_per_s:,.4g} req/s, the volume's mean load per {self.unit}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the run's rate, seed, counts, share and good tokens per second per replica."""
        return {"rate_req_per_s": self.rate_req_per_s, "seed": self.seed, "num_requests": self.num_requests,
                "num_good": self.num_good, "attainment": self.attainment,
                "good_input_tok_per_s": self.tok_per_s("input"), "good_output_tok_per_s": self.tok_per_s("output"),
                "method": "a run of the same workload and seed at the volume's mean rate ÷ replicas; good tokens per "
                          "second per replica = that rate × the run's good tokens ÷ its requests",
                **({} if self.simulated_rate_req_per_s is None else
                   {"simulated_rate_req_per_s": self.simulated_rate_req_per_s})}


def load_share_from(gp: Any, rate_req_per_s: float, seed: int | None) -> LoadShare:
    """A ``LoadShare`` from the goodput (``ledgers.goodput.GoodputResult``) of the run at ``rate_req_per_s``: token
    totals are its good (completed) token rates × its duration, rounded to whole tokens (what they count: two runs of
    the same requests whose durations differ in the last bit give the same totals)."""
    d = gp.duration_s or 0.0

    def tokens(per_s: float | None) -> float:
        return float(round((per_s or 0.0) * d))

    return LoadShare(rate_req_per_s, seed, gp.num_requests, gp.num_good, tokens(gp.goodput_input_tok_per_s),
                     tokens(gp.goodput_output_tok_per_s), tokens(gp.throughput_input_tok_per_s),
                     tokens(gp.throughput_output_tok_per_s))


def run_seed(run: Any) -> int | None:
    """The workload seed a simulated run states in its metadata (``extra["workload"]["seed"]``), else None."""
    md = getattr(run, "metadata", None)
    wl = (md.extra.get("workload") if md is not None else None) or {}
    return wl.get("seed")
