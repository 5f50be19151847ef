"""Simulations kept on disk across identical requests: ``kvledger report`` (and ``cost``/``goodput --simulate``) asked
twice for the same thing runs each simulation once.

A simulated run is a pure function of its inputs (the simulator is deterministic: explicit seeds, no wall
clock), so it is stored under a SHA-256 key of all of them: the ``SimRequestArgs`` and synthetic workload,
what the run keeps (token times, step log), the early-stop rule's settings, the contents of every input
file they name (a trace, a GPU file, a step-cost profile, a model config), and the code and data that
compute it — every file of the installed ``kvledger`` package, its version, and the Python and numpy
versions. Change any of them and the key changes, so an entry is never stale. A model fetched from the
Hugging Face Hub (content that can change under the same name) or a folder input is not cached.

Where: ``$KVLEDGER_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvledger``, else ``~/.cache/kvledger``, folder
``sims/`` (pickles of ``SimulatedRun``; any file there may be deleted at any time; past ``MAX_ENTRIES`` entries or
``MAX_BYTES`` in a folder the least recently written go, down to three quarters of the limit). Set
``KVLEDGER_NO_CACHE=1`` to neither read nor write it. Entries are written whole (a temporary file, then a
rename); an unreadable or unwritable entry is ignored (the simulation runs).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "cache_key", "code_fingerprint", "load", "store", "load_bytes", "store_bytes", "stats",
           "enabled", "cached_run", "using"]

_STATS = {"run": 0, "reused": 0}
MAX_ENTRIES = 2000  # per folder (sims/, reports/): about 0.3–5 MB a simulation, 0.2 MB a report
MAX_BYTES = 1 << 30  # per folder, 1 GiB: a cold 8B search with default GPUs stores about 0.34 GB of probes
_SIZE: dict[Path, int] = {}  # bytes in each folder: scanned at the first write of a process, then counted
_CODE: list[str] = []  # the package fingerprint, computed once per process


_USE: ContextVar[bool | None] = ContextVar("kvledger_sim_cache", default=None)  # set by ``using``; None: the env


@contextmanager
def using(on: bool) -> Iterator[None]:
    """Within the block, the store is read and written (``on``) or neither, whatever ``KVLEDGER_NO_CACHE`` says (the
    Python API's ``cache`` parameter); each thread and ``contextvars`` context holds its own choice."""
    token = _USE.set(bool(on))
    try:
        yield
    finally:
        _USE.reset(token)


def enabled() -> bool:
    """Inside :func:`using`, its choice; else False when ``KVLEDGER_NO_CACHE`` is set to anything but ``""`` or
    ``"0"``."""
    if (chosen := _USE.get()) is not None:
        return chosen
    return os.environ.get("KVLEDGER_NO_CACHE", "") in ("", "0")


def cache_dir(kind: str = "sims") -> Path:
    """The folder of stored simulations (``kind`` "sims"; module doc), or of another kind of stored result."""
    base = os.environ.get("KVLEDGER_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = str(Path(xdg) / "kvledger") if xdg else str(Path.home() / ".cache" / "kvledger")
    return Path(base) / kind


def stats() -> dict[str, int]:
    """Simulations this process ran (``run``) and took from the store (``reused``)."""
    return dict(_STATS)


def code_fingerprint() -> str:
    """SHA-256 over every file of the installed package (relative path and bytes; bytecode caches left out)."""
    if not _CODE:
        import numpy

        import kvledger

        root = Path(kvledger.__file__).parent
        h = hashlib.sha256(f"{getattr(kvledger, '__version__', '')}|{sys.version}|{numpy.__version__}".encode())
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(path.read_bytes())
        _CODE.append(h.hexdigest())
    return _CODE[0]


def _file_part(value: Any) -> str | None:
    """A string naming an existing file: its bytes' SHA-256; a folder: ``"dir"`` (not cached); else ``""``."""
    if not isinstance(value, str) or not value:
        return ""
    try:
        p = Path(value).expanduser()
        if p.is_dir():
            return None
        return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
    except (OSError, ValueError):
        return ""


def cache_key(args: Any, synthetic: Any, record_steps: bool, record_token_times: bool, stop: Any) -> str | None:
    """The key of a simulation (module doc); None when it must not be cached (a Hub model, a folder input)."""
    from kvledger.catalog.models import resolve_bundled

    parts: list[str] = [repr(sorted(asdict(args).items())), repr(synthetic), repr((record_steps, record_token_times))]
    if stop is not None:
        parts.append(repr([(f.name, getattr(stop, f.name)) for f in fields(stop) if f.init]))
    values = list(asdict(args).values()) + ([getattr(synthetic, f.name) for f in fields(synthetic)] if synthetic
                                            else [])
    for v in values:
        got = _file_part(v)
        if got is None:
            return None
        parts.append(got)
    if not _file_part(args.model) and resolve_bundled(args.model) is None:
        return None  # a Hub id: its config can change under the same name
    parts.append(code_fingerprint())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def load_bytes(kind: str, key: str | None) -> bytes | None:
    """The stored bytes under ``key`` in ``kind``'s folder, or None (no key, caching off, absent or unreadable)."""
    if key is None or not enabled():
        return None
    try:
        return (cache_dir(kind) / key).read_bytes()
    except OSError:
        return None


def _prune(d: Path, adding: int) -> None:
    """Make room for ``adding`` bytes in ``d``: past ``MAX_ENTRIES`` entries or ``MAX_BYTES``, the least recently
    written go until three quarters of each limit is left (the folder is scanned at a process's first write and when
    its running count passes the limit)."""
    if d in _SIZE and _SIZE[d] + adding <= MAX_BYTES:
        _SIZE[d] += adding
        return
    entries = []
    for e in os.scandir(d):
        try:
            if e.is_file():
                st = e.stat()
                entries.append((st.st_mtime_ns, e.name, st.st_size, e.path))
        except OSError:  # removed by another process meanwhile
            continue
    total = sum(size for _, _, size, _ in entries) + adding
    count = len(entries) + 1
    if total > MAX_BYTES or count > MAX_ENTRIES:
        entries.sort()
        for _, _, size, path in entries:
            if total <= MAX_BYTES * 3 // 4 and count <= MAX_ENTRIES * 3 // 4:
                break
            try:
                os.unlink(path)
            except OSError:
                pass
            total -= size
            count -= 1
    _SIZE[d] = total


def store_bytes(kind: str, key: str | None, data: bytes) -> None:
    """Keep ``data`` under ``key`` in ``kind``'s folder, written whole (temporary file, rename); failures ignored."""
    if key is None or not enabled():
        return
    d = cache_dir(kind)
    try:
        d.mkdir(parents=True, exist_ok=True)
        _prune(d, len(data))
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / key)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:  # read-only or full disk: the result is simply not kept
        return


def load(key: str | None) -> Any:
    """The stored run under ``key``, or None (no key, caching off, absent or unreadable)."""
    data = load_bytes("sims", None if key is None else f"{key}.pickle")
    if data is None:
        return None
    try:
        run = pickle.loads(data)
    except Exception:  # truncated, or written by another version of a dependency: run it again
        return None
    _STATS["reused"] += 1
    return run


def store(key: str | None, run: Any) -> None:
    """Keep ``run`` under ``key`` (counted as run either way); an object that does not pickle is not kept."""
    _STATS["run"] += 1
    if key is None or not enabled():
        return
    try:
        data = pickle.dumps(run, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return
    store_bytes("sims", f"{key}.pickle", data)


def cached_run(key: str | None, compute: Callable[[], Any]) -> Any:
    """The stored run under ``key``, else ``compute()``, stored."""
    run = load(key)
    if run is None:
        run = compute()
        store(key, run)
    return run
