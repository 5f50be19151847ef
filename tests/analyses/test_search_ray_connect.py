"""``--ray-address`` with no cluster behind it: refused in one paragraph naming the address (exit 2), never Ray's
traceback nor its minutes of retries. Ray need not be installed: a fake ray module and a patched TCP check."""

from __future__ import annotations

import socket
import sys
import types

import pytest
from typer.testing import CliRunner

from kvledger.analyses.search import ray_connect
from kvledger.cli.main import app
from kvledger.errors import InputError

S8 = ["search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=300ms,tpot=40ms", "--num-requests", "200", "--rate", "5",
      "--gpus", "H100", "--tp", "1", "--max-model-len", "16K"]


def _fake_ray(monkeypatch, init):
    fake = types.ModuleType("ray")
    fake.is_initialized = lambda: False
    fake.init = init
    fake.shutdown = lambda: None
    exc = types.ModuleType("ray.exceptions")
    exc.RayError = type("RayError", (Exception,), {})
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setitem(sys.modules, "ray.exceptions", exc)
    monkeypatch.setattr("kvledger.analyses.search.runner.ray_available", lambda: True)


def test_auto_with_no_cluster_is_refused_in_one_paragraph(monkeypatch):
    def init(**kw):  # what ray.init(address="auto") raises with no cluster running (ray._private.services)
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to by "
                              "setting the `--address` flag or `RAY_ADDRESS` environment variable.")

    _fake_ray(monkeypatch, init)
    res = CliRunner().invoke(app, [*S8, "--ray-address", "auto"])
    assert isinstance(res.exception, InputError), res.output  # main prints an InputError as one paragraph, exit 2
    # Ray's first sentence kept, its own `--address` advice left out
    assert str(res.exception).startswith("--ray-address auto: Ray found no cluster to join (Could not find any "
                                         "running Ray instance); start the cluster first")
    assert "RAY_ADDRESS" not in str(res.exception)


def test_an_address_nobody_listens_on_is_refused_before_ray_is_asked(monkeypatch):
    def init(**kw):
        raise AssertionError("ray.init must not be reached: it retries a dead address for minutes")

    _fake_ray(monkeypatch, init)
    seen = []

    def refuse(addr, timeout):
        seen.append((addr, timeout))
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "create_connection", refuse)
    res = CliRunner().invoke(app, [*S8, "--ray-address", "127.0.0.1:1"])
    assert isinstance(res.exception, InputError), res.output
    assert seen == [(("127.0.0.1", 1), ray_connect.CONNECT_TIMEOUT_S)]
    assert str(res.exception).startswith("--ray-address 127.0.0.1:1: no Ray cluster answers there (a TCP connection "
                                         "to 127.0.0.1:1 failed within 3 s: Connection refused)")


def test_a_timeout_is_named_and_an_open_port_passes(monkeypatch):
    def slow(addr, timeout):
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", slow)
    with pytest.raises(InputError, match=r"^--ray-address ray://\[::1\]:10001: .*within 0.5 s: timed out\)"):
        ray_connect.check_ray_address("ray://[::1]:10001", timeout_s=0.5)

    class Open:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    monkeypatch.setattr(socket, "create_connection", lambda addr, timeout: Open())
    ray_connect.check_ray_address("10.0.0.5:6379")  # a port that opens is Ray's to join
    ray_connect.check_ray_address("auto")  # auto is Ray's to resolve (ConnectionError caught at ray.init)
    ray_connect.check_ray_address("AUTO")  # as are its other spellings and "local" (Ray's own local-cluster word)
    ray_connect.check_ray_address("local")


@pytest.mark.parametrize("bad", ["foo", "host:", "host:70000", ":6379"])
def test_an_address_that_is_not_host_port_is_refused(bad):
    with pytest.raises(InputError, match=r"give auto, local or HOST:PORT"):
        ray_connect.check_ray_address(bad)
