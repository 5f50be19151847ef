"""The cheapest mix of instance sizes for n replicas: a small integer program over a provider's price rows, solved
exactly (``instances.pack`` and ``instances.staircase_usd_per_hour`` both read it, so they bill alike).

Each row is a step: an instance holds ``per`` replicas (a replica never spans two instances) at ``usd`` per hour and
bills ``gpus`` GPUs. n replicas need counts c_i ≥ 0 with Σ c_i × per_i ≥ n; the bill is Σ c_i × usd_i, the least
taken, ties by fewer GPUs billed (fewer idle: the GPUs used are fixed), then by the rows' keys. A dynamic program over
the replica count solves it up to T = (p − 1) × max per + p replicas, p the per of the row cheapest per replica (b);
beyond T the bulk goes on b. That is exact for the bill: of any p instances of other rows some subset holds a multiple
m × p of replicas (their running sums mod p repeat), and m instances of b hold as many for no more money, so a
cheapest mix has fewer than p instances off b; past (p − 1) × max per replicas it has one of b, and n replicas cost
one b instance more than n − p.

A deployment is billed by one provider: the mix is taken among the rows of one provider at a time (the part of a row's
key before its first ":"), and the cheapest of those mixes is the answer, ties as above (without --gpu-provider the
rows of every provider are considered, but one 8x instance of one cloud and a 1x VM of another are not one rental).
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["Step", "cheapest_counts", "provider_of", "slope_key"]

#: (replicas per instance, USD per instance-hour, GPUs billed per instance, row key)
Step = tuple[int, float, int, str]


def slope_key(replicas_per_instance: int, usd_per_instance_hour: float, row: str) -> tuple[float, int, str]:
    """How rows rank as the staircase's slope: cheapest per replica; of equal slopes the finest steps, then the key
    (the bulk's row here, ``breakeven``'s slope row)."""
    return usd_per_instance_hour / replicas_per_instance, replicas_per_instance, row


def _slope_row(steps: tuple[Step, ...]) -> int:
    """The index of the slope's row (``slope_key``)."""
    return min(range(len(steps)), key=lambda i: slope_key(steps[i][0], steps[i][1], steps[i][3]))


def _head(cost: float, gpus: int) -> tuple[float, int]:
    """A mix compared before its row keys: the bill (to 1e-9 $/h, so sums in another order tie), GPUs billed."""
    return round(cost, 9), gpus


def _keys(steps: tuple[Step, ...], counts: tuple[int, ...]) -> tuple[str, ...]:
    """A mix's row keys, one per instance, sorted: the last tie-break, built only where bill and GPUs tie (a list as
    long as the instances rented)."""
    return tuple(sorted(s[3] for c, s in zip(counts, steps, strict=True) for _ in range(c)))


def _better(steps: tuple[Step, ...], head: tuple[float, int], counts: tuple[int, ...],
            best: tuple[tuple[float, int], tuple[int, ...]] | None) -> bool:
    """Whether the mix ``counts`` (its ``head``) sorts before ``best`` = (head, counts): bill, GPUs, row keys."""
    return best is None or head < best[0] or (head == best[0] and _keys(steps, counts) < _keys(steps, best[1]))


@lru_cache(maxsize=256)
def _table(steps: tuple[Step, ...], top: int) -> tuple[tuple[int, ...], ...]:
    """The cheapest counts per row for 0 … ``top`` replicas (a dynamic program: cover m replicas with one instance
    of some row and the cheapest cover of the rest)."""
    best: list[tuple[float, int, tuple[int, ...]]] = [(0.0, 0, (0,) * len(steps))]  # (bill, GPUs, counts)
    for m in range(1, top + 1):
        pick: tuple[tuple[float, int], tuple[int, ...]] | None = None
        sums: tuple[float, int] = (0.0, 0)
        for i, (per, usd, gpus, _) in enumerate(steps):
            cost0, gpus0, counts0 = best[max(0, m - per)]
            counts = counts0[:i] + (counts0[i] + 1,) + counts0[i + 1:]
            if _better(steps, _head(cost0 + usd, gpus0 + gpus), counts, pick):
                pick, sums = (_head(cost0 + usd, gpus0 + gpus), counts), (cost0 + usd, gpus0 + gpus)
        best.append((sums[0], sums[1], pick[1]))
    return tuple(b[2] for b in best)


def provider_of(key: str) -> str:
    """The provider of a row key ``provider:instance_type`` (a price the user gave: its key, one row alone)."""
    return key.split(":", 1)[0]


def cheapest_counts(steps: tuple[Step, ...], replicas: int) -> tuple[int, ...]:
    """Instances of each row in the cheapest mix holding ``replicas`` replicas, every row rented of one provider
    (module docstring); all 0 for none."""
    if replicas <= 0:
        return (0,) * len(steps)
    best: tuple[tuple[float, int], tuple[int, ...]] | None = None
    for prov in dict.fromkeys(provider_of(s[3]) for s in steps):
        idx = [i for i, s in enumerate(steps) if provider_of(s[3]) == prov]
        sub = _cheapest_of(tuple(steps[i] for i in idx), replicas)
        counts = [0] * len(steps)
        for i, c in zip(idx, sub, strict=True):
            counts[i] = c
        head = _head(sum(c * s[1] for c, s in zip(counts, steps, strict=True)),
                     sum(c * s[2] for c, s in zip(counts, steps, strict=True)))
        if _better(steps, head, tuple(counts), best):
            best = (head, tuple(counts))
    return best[1]


def _cheapest_of(steps: tuple[Step, ...], replicas: int) -> tuple[int, ...]:
    """``cheapest_counts`` over ``steps`` as one provider's rows (any mix of them)."""
    b = _slope_row(steps)
    p = steps[b][0]
    top = (p - 1) * max(s[0] for s in steps) + p
    if replicas <= top:
        return _table(steps, top)[replicas]
    q = math.ceil((replicas - top) / p)  # the bulk on row b, the rest (top − p, top] from the table
    counts = _table(steps, top)[replicas - q * p]
    return counts[:b] + (counts[b] + q,) + counts[b + 1:]
