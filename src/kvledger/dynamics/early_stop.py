"""Early stop of an SLO probe: the rule that proves, mid-run, that a simulation cannot reach its attainment target.

A request is *certain to miss* the SLO once it is rejected, once it has finished outside a TTFT,
TPOT or E2E limit, or once it is still waiting or running at a replica's clock ``now`` with
``now − arrival > TTFT limit`` and no token yet (its first token comes at the end of a later
step, so its TTFT exceeds the limit), or with ``now − arrival > E2E limit`` (its finish comes
later still). Such a request stays counted after it finishes. With ``k`` requests certain to miss among ``N``,
attainment (good ÷ all requests)
is at most ``(N − k) / N`` even if every other request met the SLO; once that is below the
target, the run's verdict — it misses — is the one running it to the end gives, and the
simulation stops. Under overload the waiting queue grows with the trace, so ``k`` passes the
threshold long before the last request finishes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvledger.records import RequestRecord

__all__ = ["MissRule", "RULE_TEXT"]

RULE_TEXT = ("early stop (kvledger.dynamics.early_stop): a probe stops once the requests certain to miss the SLO — "
             "rejected, finished outside a TTFT, TPOT or E2E limit, or still waiting or running at the replica's clock "
             "more than the TTFT limit after arrival without a first token, or more than the E2E limit after "
             "arrival — number k with (N − k) / N below the "
             "target: even if every other request met the SLO, attainment ≤ (N − k) / N, so the probe misses, as it "
             "does when run to the end; its attainment and goodput are then those of the requests finished by then "
             "(lower bounds), and attainment_upper is (N − k) / N")


@dataclass
class MissRule:
    """Decides, from the replicas' state, that a run of ``num_requests`` cannot reach ``target``.

    Args:
        target: attainment target, in (0, 1].
        ttft_s, e2e_s, tpot_s: the SLO's limits, s (None: not constrained). TTFT and E2E also judge
            requests still waiting or running; TPOT only finished ones.
        num_requests: requests in the run (the attainment denominator), count; None → set by the
            simulator from the workload.
        check_every: finished or rejected requests between two checks, count; None → 1 % of the
            workload (a check scans the waiting and running requests).
    """

    target: float
    ttft_s: float | None = None
    e2e_s: float | None = None
    tpot_s: float | None = None
    num_requests: int | None = None
    check_every: int | None = None
    doomed: set[int] = field(default_factory=set)  # uids certain to miss (rejected ones counted apart)
    rejected: int = 0
    stopped_at_s: float | None = None
    _seen: int = 0
    _next: int = 0

    def due(self, done: int) -> bool:
        """Whether a check is due after ``done`` finished or rejected requests."""
        return done >= self._next

    def decided(self, replicas: list, out: list[tuple[int, RequestRecord]]) -> bool:
        """Mark the requests now certain to miss; True when (N − k) / N < target."""
        self._next = len(out) + self.check_every
        ttft, tpot, e2e, doomed = self.ttft_s, self.tpot_s, self.e2e_s, self.doomed
        for uid, rec in out[self._seen:]:
            if rec.error is not None:
                self.rejected += 1
            elif ((ttft is not None and rec.ttft_s > ttft) or (tpot is not None and rec.tpot_s > tpot)
                  or (e2e is not None and rec.e2e_s > e2e)):
                doomed.add(uid)  # finished and missed: its figures are final (records.py definitions, as goodput's)
        self._seen = len(out)
        for rep in replicas:
            now = rep.now_s
            for queue in (rep.sched.waiting, rep.sched.running):
                for r in queue:
                    age = now - r.arrival_s
                    if (ttft is not None and r.num_generated == 0 and age > ttft) or (e2e is not None and age > e2e):
                        doomed.add(r.uid)
        if self.attainment_upper < self.target:
            self.stopped_at_s = max(rep.now_s for rep in replicas)
            return True
        return False

    @property
    def num_certain_misses(self) -> int:
        return len(self.doomed) + self.rejected

    @property
    def attainment_upper(self) -> float:
        """(N − k) / N: the most the run's attainment can be, fraction."""
        n = self.num_requests
        return (n - self.num_certain_misses) / n if n else 0.0

    def record(self, spec) -> RequestRecord:
        """The record of a request the stopped run did not finish: an error (never good), no times."""
        return RequestRecord(spec.request_id, spec.arrival_s, spec.num_prompt_tokens, 0, error=(
            "not simulated to the end: the probe stopped early, its miss decided (kvledger.dynamics.early_stop)"))

    def evidence(self) -> dict:
        """JSON-ready: when it stopped and why."""
        return {"stopped_at_s": self.stopped_at_s, "num_requests": self.num_requests,
                "certain_misses": self.num_certain_misses, "of_which_rejected": self.rejected,
                "attainment_upper": self.attainment_upper, "target": self.target}
