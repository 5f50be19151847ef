"""A local Ray cluster of ``search --workers N`` starts with token authentication chosen explicitly
(``ray_connect.LOCAL_RAY_ENV``), so Ray does not warn "Token authentication is enabled for this Ray cluster. Set
RAY_AUTH_MODE=disabled to opt out" on stderr (ray/_private/authentication/authentication_token_setup.py
``enable_token_auth_by_default`` warns only where RAY_AUTH_MODE is unset); the cluster keeps its token."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kvledger.analyses.search.ray_connect import local_ray_env

_START = """
import os, sys
if sys.argv[1] == "set":
    from kvledger.analyses.search.ray_connect import local_ray_env
    local_ray_env(os.environ)
import ray
from ray._raylet import AuthenticationMode, get_authentication_mode
from kvledger.analyses.search.ray_connect import start_ray
start_ray(ray, None, 1)
print(get_authentication_mode() == AuthenticationMode.TOKEN)
ray.shutdown()
"""


def test_the_local_cluster_env_sets_what_is_unset_and_keeps_the_users():
    env = {"RAY_AUTH_MODE": "disabled"}
    local_ray_env(env)
    assert env == {"RAY_AUTH_MODE": "disabled", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # the user's choice stands
    env = {}
    local_ray_env(env)
    assert env == {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token"}


def test_a_local_cluster_starts_with_its_token_and_without_rays_token_warning(tmp_path):
    pytest.importorskip("ray")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"HOME": str(tmp_path)}

    def start(how: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", _START, how], capture_output=True, text=True, env=env,
                              timeout=240, check=True)

    quiet = start("set")
    assert quiet.stdout.strip() == "True"  # token authentication on, as Ray's default
    assert "Token authentication is enabled" not in quiet.stderr
    assert (tmp_path / ".ray" / "auth_token").is_file()  # Ray generated the token, as it does by default
    loud = start("unset")  # without it (before), Ray's warning on stderr
    assert loud.stdout.strip() == "True" and "Token authentication is enabled for this Ray cluster" in loud.stderr
