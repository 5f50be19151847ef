"""The bundled price tables: internal consistency of every row, and look-ups by name."""

from __future__ import annotations

import pytest

from kvledger.catalog.api_match import find_api_price
from kvledger.catalog.prices import api_prices, find_gpu_price, find_gpu_prices, gpu_prices
from kvledger.errors import InputError, UnknownNameError


def test_row_counts_and_provenance_on_every_row():
    # 50 GPU rows + TensorWave's MI325X (8-GPU node, low confidence)
    assert (len(api_prices()), len(gpu_prices())) == (83, 51)
    for r in (*api_prices(), *gpu_prices()):
        assert r.source and r.as_of and r.confidence in ("high", "medium", "low")


def test_gpu_rows_per_gpu_price_is_instance_price_over_gpus():
    # e.g. AWS p5.48xlarge: $55.04 / 8 GPUs = $6.88 per GPU-hour
    for r in gpu_prices():
        assert r.usd_per_gpu_hour == pytest.approx(r.instance_usd_per_hour / r.gpus_per_instance, rel=1e-3), r.key


def test_api_rows_cache_multiplier_and_discounts_agree():
    for r in api_prices():
        if r.cached_input_usd_per_mtok is not None:
            assert r.cached_input_usd_per_mtok <= r.input_usd_per_mtok, r.key
            if r.cache_read_multiplier is not None:
                assert r.cached_input_usd_per_mtok / r.input_usd_per_mtok == pytest.approx(r.cache_read_multiplier,
                    abs=2e-3), r.key
        assert r.batch_discount in (None, 0.5), r.key
    # docs/cost.md §6: DeepSeek has no batch API; Anthropic bills cache writes at 1.25× input (5-minute TTL)
    assert all(r.batch_discount is None for r in api_prices() if r.provider == "DeepSeek")
    sonnet = find_api_price("claude-sonnet-4.5")
    assert sonnet.cache_write_usd_per_mtok == pytest.approx(1.25 * sonnet.input_usd_per_mtok)


def test_api_lookup_by_alias_provider_and_errors():
    assert find_api_price("OpenAI:gpt-4.1").output_usd_per_mtok == 8.0
    assert find_api_price("claude-opus-4.1").key == "Anthropic:claude-opus-4 / claude-opus-4.1"
    assert find_api_price("openai/gpt-oss-120b", provider="Groq").input_usd_per_mtok == 0.15
    with pytest.raises(InputError, match="listed by several providers: Together:openai/gpt-oss-120b, "
                                         "Groq:openai/gpt-oss-120b"):
        find_api_price("openai/gpt-oss-120b")
    with pytest.raises(UnknownNameError, match="did you mean"):
        find_api_price("gpt-4.11")


def test_gpu_lookup_ambiguity_lists_the_options():
    # Nebius sells H100 SXM as a 1-GPU and an 8-GPU preset, both $2.95/GPU-h (gpu_prices.csv, skypilot-catalog nebius)
    assert find_gpu_price("nvidia_h100_sxm", "Nebius", "gpu-h100-sxm 1gpu-16vcpu-200gb").instance_usd_per_hour == 2.95
    assert find_gpu_price("nvidia_h100_sxm", "Nebius", "gpu-h100-sxm 8gpu").instance_usd_per_hour == 23.6
    with pytest.raises(InputError, match=r"2 rental prices for 'nvidia_h100_sxm': Nebius gpu-h100-sxm 8gpu \$2\.95"):
        find_gpu_price("nvidia_h100_sxm", "Nebius")
    assert find_gpu_price("H100 80GB SXM", "Lambda", "gpu_1x_h100_sxm5").usd_per_gpu_hour == 4.29
    with pytest.raises(InputError, match=r"2 rental prices for 'nvidia_h100_sxm'.*\$3\.99/GPU-h.*\$4\.29/GPU-h"):
        find_gpu_price("nvidia_h100_sxm", "Lambda")
    with pytest.raises(UnknownNameError, match="nvidia_h100_pcie, nvidia_h100_sxm"):
        find_gpu_prices("H100")


def test_an_unknown_api_row_points_to_the_price_list_and_a_close_provider():
    # no provider Foo and no row with the word "bar": the catalog's providers and the command that lists the rows
    with pytest.raises(UnknownNameError) as err:
        find_api_price("Foo:bar")
    msg = str(err.value)
    assert msg.startswith("unknown API model 'Foo:bar'. no API provider 'Foo' (the catalog's: Anthropic, DeepInfra,")
    assert msg.endswith("kvledger prices --kind api lists every API row (PROVIDER:MODEL, as --api takes it; "
                        "--provider NAME for one provider's)")
    # Grok, one letter from Groq: the close provider is offered, with the rows of that model
    with pytest.raises(UnknownNameError) as err:
        find_api_price("Grok:openai/gpt-oss-120b")
    msg = str(err.value)
    assert "no API provider 'Grok' (did you mean Groq?); rows with those words: " in msg
    assert "Groq:openai/gpt-oss-120b" in msg and "kvledger prices --kind api" in msg
    # a model one character off: the close rows first, then the pointer
    with pytest.raises(UnknownNameError) as err:
        find_api_price("Groq:openai/gpt-oss-12b")
    assert str(err.value).startswith("unknown API model 'Groq:openai/gpt-oss-12b'; did you mean: "
                                     "Groq:openai/gpt-oss-120b")
    assert "kvledger prices --kind api" in str(err.value)


def test_an_unknown_instance_type_lists_the_rows_it_could_name():
    # gpu_prices.csv prices two Nebius H100 SXM instances; 'foo' is close to neither, so the error lists both
    with pytest.raises(UnknownNameError) as e:
        find_gpu_price("nvidia_h100_sxm", "Nebius", "foo")
    assert str(e.value) == ("unknown instance type 'foo'. The instance types priced for nvidia_h100_sxm at Nebius: "
                            "Nebius gpu-h100-sxm 8gpu; Nebius gpu-h100-sxm 1gpu-16vcpu-200gb (kvledger prices --kind "
                            "gpu lists every row)")
