"""Joining the Ray cluster ``--ray-address`` names, or starting a local one, refused in one paragraph when there is
none: an explicit HOST:PORT is first checked with a plain TCP connection (Ray itself retries an address nobody
listens on for minutes), and Ray's own ConnectionError (``auto`` with no cluster running) becomes an input error
naming the address."""

from __future__ import annotations

import socket
from typing import Any

from kvledger.errors import InputError

__all__ = ["CONNECT_TIMEOUT_S", "LOCAL_RAY_ENV", "check_ray_address", "local_ray_env", "start_ray"]

CONNECT_TIMEOUT_S = 3.0
"""Seconds the TCP connection to an explicit --ray-address HOST:PORT may take to open."""

LOCAL_RAY_ENV = {
    # Ray resolves a node address of 127.0.0.1 to the machine's network address unless this is off (its
    # ray_constants.ENABLE_RAY_CLUSTER)
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # token authentication, Ray's default for a new local cluster from 2.59, chosen explicitly: Ray warns "Token
    # authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out" on stderr only where the
    # mode is unset (ray/_private/authentication/authentication_token_setup.py enable_token_auth_by_default: "Mode set
    # explicitly; respect it without warning"); the cluster is the same, with its token
    "RAY_AUTH_MODE": "token",
}
"""The environment a local Ray cluster of ``search --workers`` starts with, where the user has not set it."""

_REMEDY = ("start the cluster first (`ray start --head` on its head node), or give the HOST:PORT it printed, or "
           "run without --ray-address: a local process pool runs the same search")


def _host_port(address: str) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` or ``ray://HOST:PORT`` (an IPv6 host in brackets); refused otherwise."""
    bare = address.removeprefix("ray://")
    host, sep, port = bare.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--ray-address {address!r}: give auto, local or HOST:PORT (e.g. 10.0.0.5:6379), the address "
                         "`ray start --head` prints")
    return host, int(port)


def check_ray_address(address: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse an explicit ``address`` (not None, ``auto`` nor ``local``: Ray's own words, any case, passed to it) where
    no TCP connection opens within ``timeout_s``."""
    if address is None or address.strip().lower() in ("auto", "local"):
        return
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as err:  # refused, unreachable, unknown host or timed out: nothing Ray could join there
        why = "timed out" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)
        raise InputError(f"--ray-address {address}: no Ray cluster answers there (a TCP connection to {host}:{port} "
                         f"failed within {timeout_s:g} s: {why}); {_REMEDY}.") from None


def local_ray_env(environ: Any) -> None:
    """Set ``LOCAL_RAY_ENV``'s variables in ``environ`` (``os.environ``, before ray is imported: Ray reads them then)
    where unset: a value the user gave (``RAY_AUTH_MODE=disabled``) is theirs."""
    for key, value in LOCAL_RAY_ENV.items():
        environ.setdefault(key, value)


def start_ray(ray: Any, address: str | None, workers: int) -> None:
    """``ray.init`` on the cluster at ``address``, or a local one of ``workers`` CPUs on 127.0.0.1 without its
    dashboard; Ray's ConnectionError (no cluster found at ``address``) is refused as an input error."""
    if address is None:
        ray.init(num_cpus=workers, include_dashboard=False, logging_level="WARNING", log_to_driver=False,
                 _node_ip_address="127.0.0.1")
        return
    try:
        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
    except ConnectionError as err:
        said = str(err).strip().split(". ")[0].rstrip(".")  # Ray's first sentence; the rest names its own flags
        raise InputError(f"--ray-address {address}: Ray found no cluster to join ({said or type(err).__name__}); "
                         f"{_REMEDY}.") from None
