"""Dynamics: the serving simulator, in four rooms, wired together by ``simulator``, ``replica`` and ``cluster``.

* ``engine/``: the engine's rules (vLLM v1 and SGLang scheduling, block pool, KV managers, radix cache, router);
  it imports nothing from the other rooms.
* ``fast/``: whole stretches of steps at once, giving the step loop's results.
* ``outputs/``: what a run reports (latency statistics, ITL gaps, KV usage, token times, step logs).
* ``workload/``: where requests come from (traces, synthetic and ServeGen workloads, closed loops).
"""
