"""``search --workers 2 --json`` on Ray with a worker killed (SIGKILL) mid-run: stdout is still one JSON document,
the candidate whose worker died is recorded as failed with Ray's reason and named on stderr, and the exit status is
non-zero. Ray's "A worker died" message goes to stderr, not into the JSON."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra")
# 4 candidates (H100 and A100-80GB × fp8/auto KV), 150 requests per probe: each capacity search takes a second or
# more, long enough to catch one running
ARGS = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100,A100-80GB", "--tp", "1",
        "--kv-cache-dtype", "auto,fp8", "--max-model-len", "8K", "--num-requests", "150", "--utilization", "0.5",
        "--workers", "2", "--backend", "ray", "--json"]


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    return kids


def _tree(root: int) -> list[int]:
    kids, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def _listening(pids: list[int]) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp* writes them) of the TCP sockets these processes listen on."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # state 0A: LISTEN
                out.append(f[1].split(":")[0])
    return out


# 127.0.0.1 in /proc/net/tcp (little-endian hex) and as an IPv4-mapped IPv6 address in /proc/net/tcp6
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}


def _task_worker(root: int) -> int | None:
    """A process under ``root`` running a candidate (Ray titles it ``ray::evaluate_candidate``)."""
    kids, todo = _children(), [root]
    while todo:
        pid = todo.pop()
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            cmd = b""
        if cmd.startswith(b"ray::evaluate_candidate"):
            return pid
        todo += kids.get(pid, [])
    return None


def test_a_killed_worker_is_a_failed_candidate_valid_json_and_exit_1():
    import shutil
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="kvr", dir="/tmp"))  # short: Ray's socket paths must stay < 108 bytes
    try:
        _run_and_kill(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _run_and_kill(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RAY_TMPDIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kvledger.cli.main", *ARGS], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        killed = _task_worker(proc.pid)
        if killed is None:
            time.sleep(0.05)
    if killed is None:
        proc.kill()
        pytest.fail("no Ray task worker seen (the search ended first): " + proc.communicate()[1].decode()[-3000:])
    listening = _listening(_tree(proc.pid))
    os.kill(killed, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    d = json.loads(out)  # the whole of stdout is one JSON document: no "(raylet) A worker died" line in it
    failed = [e for e in d["candidates"] if e["status"] == "error"]
    assert proc.returncode == 1, err.decode()[-2000:]
    assert len(failed) == 1 and failed[0]["reason"] == "worker failed" and failed[0]["detail"]
    assert failed[0]["id"] in err.decode() and "could not be evaluated" in err.decode()
    assert sum(e["status"] == "feasible" for e in d["candidates"]) == 3  # the others went on
    # the local cluster (GCS, raylet, workers) listened on the loopback address only
    assert listening and set(listening) <= LOOPBACK, listening
