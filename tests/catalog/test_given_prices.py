"""``--gpu-usd-per-hour`` read once for every command (``kvledger.catalog.given_prices``): one number or a price per
GPU, names resolved through the catalog, and what each command keeps of it."""

from __future__ import annotations

import pytest

from kvledger.catalog.given_prices import given_source, given_usd, one_gpu_usd, parse_gpu_usd, price_of
from kvledger.errors import InputError


def test_one_number_is_a_number_within_the_commands_range():
    assert parse_gpu_usd("2.5", "search") == 2.5 and parse_gpu_usd(3, "cost") == 3.0
    assert parse_gpu_usd(None, "search") is None
    # one number keeps each command's range as when the flag took a float: 0 is no price to cost or search (it would
    # divide by zero) but is offload's and report's [0, 1e6]
    assert parse_gpu_usd("0", "offload") == 0.0
    with pytest.raises(InputError, match=r"^--gpu-usd-per-hour 0 is out of range; allowed: \(0, 1,000,000\] "
                                         r"USD/GPU-hour$"):
        parse_gpu_usd("0", "search")


def test_a_list_is_keyed_by_catalog_id_sorted():
    got = parse_gpu_usd(" H100 = 2.49 , A100-80GB=1.29,", "search")  # spaces and a trailing comma are allowed
    assert got == {"nvidia_h100_sxm": 2.49, "nvidia_a100_80gb_sxm": 1.29}
    assert list(got) == ["nvidia_a100_80gb_sxm", "nvidia_h100_sxm"]  # one order however written: the same notes
    assert parse_gpu_usd({"h100_sxm": 2, "L40S": 0.9}) == {"nvidia_h100_sxm": 2.0, "nvidia_l40s": 0.9}  # Python API
    assert parse_gpu_usd(got) == got  # read again: the same (a SearchSpec reads its list once more)


@pytest.mark.parametrize("text, message", [
    ("abc", "--gpu-usd-per-hour 'abc' is not a number; give one price for every GPU (2.49) or GPU=PRICE pairs"),
    ("H100=abc", "--gpu-usd-per-hour 'H100=abc': 'abc' is not a number"),
    ("H100=0", "--gpu-usd-per-hour H100=0 is out of range; allowed: (0, 1,000,000] USD/GPU-hour"),
    ("H100=-1", "--gpu-usd-per-hour H100=-1 is out of range; allowed: (0, 1,000,000] USD/GPU-hour"),
    ("H100=nan", "--gpu-usd-per-hour H100=nan is out of range"),
    ("H1000=2", "--gpu-usd-per-hour H1000=2: unknown GPU 'H1000'; did you mean: h100"),
    ("H100=2,nvidia_h100_sxm=3", "--gpu-usd-per-hour names nvidia_h100_sxm twice (H100 and nvidia_h100_sxm)"),
    ("H100=2,3", "--gpu-usd-per-hour '3' names no GPU: in a list each item is GPU=PRICE"),
])
def test_a_bad_price_or_name_is_refused_in_one_line(text, message):
    # a listed price is never 0, whatever the command: no GPU is free by mistake
    for command in ("search", "offload"):
        with pytest.raises(InputError) as err:
            parse_gpu_usd(text, command)
        assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_typo_gets_the_catalogs_suggestions_without_its_gpu_file_hints():
    # was: the catalog's whole error, whose hints on --gpu FILE.json and --gpu-memory overrides do not apply to a price
    with pytest.raises(InputError) as err:
        parse_gpu_usd("H100=2.49,L4OS=0.9")
    assert str(err.value) == ("--gpu-usd-per-hour L4OS=0.9: unknown GPU 'L4OS'; did you mean: l4, l40s, l40? "
                              "(`kvledger gpus` lists the catalog; a GPU file is named by its path)")


def test_search_and_one_gpu_commands_take_what_the_list_gives():
    prices = parse_gpu_usd("H100=2.49,L4=0.5")
    assert given_usd(prices, "nvidia_l4") == 0.5 and given_usd(prices, "nvidia_a10") is None  # left out: the table's
    assert given_usd(2.0, "nvidia_a10") == 2.0 and given_usd(None, "nvidia_a10") is None
    assert given_source(prices, "nvidia_l4") == "user input (--gpu-usd-per-hour, nvidia_l4)"
    # one number: the GPU it priced named too, and the --gpu-provider that labels it; no GPU known: the flag alone
    assert given_source(2.0, "nvidia_l4") == "user input (--gpu-usd-per-hour, nvidia_l4)"
    assert given_source(2.0, "nvidia_l4", "lambda") == "user input (--gpu-usd-per-hour, nvidia_l4 at Lambda)"
    assert price_of(prices, "h100-sxm") == (2.49, "user input (--gpu-usd-per-hour, nvidia_h100_sxm)")
    assert price_of(2.0, "H100") == (2.0, "user input (--gpu-usd-per-hour, nvidia_h100_sxm)")
    assert price_of(2.0, None) == (2.0, "user input (--gpu-usd-per-hour)") and price_of(None, "H100") is None
    assert one_gpu_usd("H100=2.49,L4=0.5", "L4", "report") == 0.5 and one_gpu_usd("3", "L4", "report") == 3.0
    with pytest.raises(InputError, match=r"^--gpu-usd-per-hour lists prices for nvidia_h100_sxm, nvidia_l4, not for "
                                         r"the GPU priced here, A10 \(nvidia_a10\): add nvidia_a10=PRICE to the list, "
                                         r"or give one number$"):
        price_of(prices, "A10")
    with pytest.raises(InputError, match="the run does not name its GPU"):
        price_of(prices, None)


def test_a_search_spec_keeps_one_number_a_number_and_a_list_an_object():
    from kvledger.analyses.search import SearchSpec

    base = {"model": "m", "slo": "ttft=1s", "utilization": 0.5}
    # a ledger written with one number resumes: the number stays a number in the spec's JSON, absent when not given
    assert SearchSpec(**base, gpu_usd_per_hour=2.5).to_dict()["gpu_usd_per_hour"] == 2.5
    assert "gpu_usd_per_hour" not in SearchSpec(**base).to_dict()
    spec = SearchSpec(**base, gpu_usd_per_hour={"H100": 2.49, "a100-80gb": 1.29})
    assert spec.to_dict()["gpu_usd_per_hour"] == {"nvidia_h100_sxm": 2.49, "nvidia_a100_80gb_sxm": 1.29}
    spec.check()
    with pytest.raises(InputError, match="unknown GPU 'H1000'"):
        SearchSpec(**base, gpu_usd_per_hour={"H1000": 2})


def test_the_search_note_names_only_gpus_the_table_priced():
    # was: a candidate rejected for having no price row was said to be priced "from the price table"
    from types import SimpleNamespace

    from kvledger.analyses.search.given_price import price_notes

    spec = SimpleNamespace(gpu_usd_per_hour=parse_gpu_usd("H100=2"), gpu_provider=None)
    entries = [{"gpu_id": "nvidia_h100_sxm", "status": "feasible"},
               {"gpu_id": "nvidia_rtx_pro_6000_server", "status": "rejected"},
               {"gpu_id": "nvidia_l4", "status": "feasible"}]
    assert price_notes(spec, entries) == [
        "GPU prices: given (--gpu-usd-per-hour) for nvidia_h100_sxm $2/GPU-h; nvidia_l4 from the price table: the "
        "cheapest on-demand row of each GPU in gpu_prices.csv (any provider); --gpu-provider fixes one"]
