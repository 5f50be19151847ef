"""A GPU file's links (interconnect_gb_s, host_link_gb_s): without them and without ``base`` the GPU has no link
figure, and TP > 1 or a KV tier below HBM is refused naming the file and the field, instead of dividing by 0."""

from __future__ import annotations

import pytest
from console_run import console as _cli

from kvledger.accounting.kv_tiers import load_s
from kvledger.accounting.tp_comm import allreduce_step_s, link_bytes_per_s
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.errors import ConfigError, InputError

M = "meta-llama/Llama-3.1-8B"
_BODY = 'name = "X"\nmemory = "47.5GiB"\nbandwidth_tb_s = 1.2\nbf16_tflops = 300\n'



@pytest.fixture
def bare(tmp_path):
    f = tmp_path / "my-gpu.toml"
    f.write_text(_BODY)
    return f


@pytest.mark.parametrize("args,field", [
    (["--tp", "2"], "interconnect_gb_s"),
    (["--kv-offloading-size", "64"], "host_link_gb_s"),
])
def test_plan_without_links_names_the_file_and_the_field(monkeypatch, capsys, bare, args, field):
    code, _, err = _cli(monkeypatch, capsys, "plan", M, "--gpu", str(bare), *args)
    assert code == 2
    assert f"GPU file {bare}" in err and f"{field} = <GB/s>" in err


def test_plan_json_without_links_is_a_json_error(monkeypatch, capsys, bare):
    import json

    code, out, _ = _cli(monkeypatch, capsys, "plan", M, "--gpu", str(bare), "--tp", "2", "--json")
    assert code == 2
    assert "interconnect_gb_s" in json.loads(out)["error"]["message"]


def test_given_links_are_read_in_gb_s_bidirectional(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text(_BODY + "host_link_gb_s = 64\n")
    g = resolve_gpu(str(f))
    # 64 GB/s bidirectional, no scale-up link: the all-reduce falls back to the host link, 64e9 / 2 = 32e9 B/s a way,
    # of which an all-reduce over PCIe achieves 0.35 (tp_comm.PCIE_ALLREDUCE_SHARE): 32e9 × 0.35 = 11.2e9 B/s
    assert (g.host_link_bytes_per_s, g.interconnect_bytes_per_s) == (64e9, 0.0)
    assert link_bytes_per_s(g) == pytest.approx(11.2e9)
    f.write_text(_BODY + "interconnect_gb_s = 900\nbase = \"L40S\"\n")
    g = resolve_gpu(str(f))
    # the file's 900 GB/s overrides the L40S's none (0); the host link, 64 GB/s (PCIe Gen4 x16), is the base's
    assert (g.interconnect_bytes_per_s, g.host_link_bytes_per_s) == (900e9, 64e9)
    assert link_bytes_per_s(g) == 450e9


def test_a_zero_host_link_is_refused_with_its_range(tmp_path):
    f = tmp_path / "g.json"
    f.write_text('{"memory": "80GiB", "bandwidth_tb_s": 3.35, "bf16_tflops": 989, "host_link_gb_s": 0}')
    with pytest.raises(ConfigError, match=r"g.json: field 'host_link_gb_s'.*0 < GB/s"):
        resolve_gpu(str(f))


def test_zero_bandwidth_divides_are_refused():
    with pytest.raises(InputError, match="link bandwidth > 0"):
        allreduce_step_s(8, 4096, 32, 2, 1e-5, 0.0)
    with pytest.raises(InputError, match="read bandwidth must be > 0"):
        load_s(1024, 131072, 0.0)
    # 1024 tokens × 131,072 B / 25.6e9 B/s = 5.24288e-3 s
    assert load_s(1024, 131072, 25.6e9) == pytest.approx(5.24288e-3)


@pytest.mark.parametrize("body,message", [
    # 1,000,000 TB = 1e18 B = 1e18 / 2^40 TiB = 909,494.7 TiB; the range is custom_gpu's 1 MiB … 2^45 B = 32 TiB
    ('memory = "1000000TB"\nbandwidth_tb_s = 1\nbf16_tflops = 100\n',
     r"g.toml: memory: GPU memory 909,495 TiB is not plausible \(expected 1 MiB–32 TiB\)"),
    # 100 KiB is below 1 MiB
    ('memory = "100KiB"\nbandwidth_tb_s = 1\nbf16_tflops = 100\n',
     r"g.toml: memory: GPU memory 100 KiB is not plausible \(expected 1 MiB–32 TiB\)"),
    ('memory = "40GiB"\nbandwidth_tb_s = 0.0001\nbf16_tflops = 100\n',
     r"g.toml: bandwidth_tb_s: GPU HBM bandwidth 0.0001 TB/s is not plausible \(expected 0.001–1,000 TB/s\)"),
])
def test_implausible_figures_name_the_file_and_read_plainly(tmp_path, body, message):
    f = tmp_path / "g.toml"
    f.write_text(body)
    with pytest.raises(InputError, match=message):
        resolve_gpu(str(f))


def test_a_kv_link_the_gpu_file_lacks_names_the_field(bare):
    from kvledger.dynamics.engine.kv_transfer import link_from_gpu

    g = resolve_gpu(str(bare))
    with pytest.raises(InputError, match=rf"X has no nvlink bandwidth \(GPU file {bare}: add interconnect_gb_s"):
        link_from_gpu(g, "nvlink")
    with pytest.raises(InputError, match=r"no pcie bandwidth \(GPU file .*: add host_link_gb_s"):
        link_from_gpu(g, "pcie")
