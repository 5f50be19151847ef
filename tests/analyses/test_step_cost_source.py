"""The roofline step cost's source names the mechanism that overlaps CPU and GPU: vLLM's async scheduling, or
SGLang's overlap scheduling (whose engine config is synchronous: batching 'sglang')."""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.analyses.serving.step_cost_choice import make_step_cost
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model


def _source(engine: str, policy: str | None, overlap_cpu: bool) -> str:
    m, g = load_model("meta-llama/Llama-3.1-8B"), resolve_gpu("H100")
    a = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", **({"policy": policy} if policy else {}))
    _, info = make_step_cost(a, build_plan(m, g, make_settings(engine=engine), with_advice=False), overlap_cpu)
    return info["source"]


def test_sglang_overlap_is_not_called_async_scheduling():
    # --policy sglang: the simulator's config has async_scheduling False ("batching='sglang' schedules synchronously"),
    # and the overlap max(GPU, CPU) comes from SGLang 0.5.23's event_loop_overlap (sglang_steps.py); the source said
    # "(async scheduling)", vLLM's mechanism, which the run's own notes say is off
    src = _source("sglang", "sglang", False)
    assert "overlapping the GPU (SGLang's overlap scheduling): max(GPU, CPU) per step" in src
    assert "async scheduling" not in src
    # vLLM with async scheduling on keeps its name; off, the overhead adds
    assert "overlapping the GPU (async scheduling): max(GPU, CPU)" in _source("vllm", None, True)
    assert "+ CPU overhead per step" in _source("vllm", None, False)


def test_sglang_sources_say_overlap_one_way():
    # goodput --policy sglang listed "SGLang's scheduler (..., overlap and mixed chunks off)" beside "overlap
    # scheduling (... on unless --disable-overlap-schedule): a step takes max(GPU, CPU)": the two now say the same,
    # as simulate does: the step cost takes max(GPU, CPU); the scheduler's one-step lag in seeing results is not
    # modelled
    from kvledger.accounting.sglang_steps import SGLANG_OVERLAP_NOTE
    from kvledger.dynamics.engine.config import BATCHING_POLICIES
    rule = BATCHING_POLICIES["sglang"]
    assert "overlap and mixed chunks off" not in rule and "mixed chunks off" in rule
    assert "max(GPU, CPU), is in the step cost, its one-step lag in seeing results" in rule
    assert SGLANG_OVERLAP_NOTE.endswith("max(GPU, CPU); its one-step lag in seeing results is not modelled")
