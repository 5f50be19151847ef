"""Build hook: compile the optional C core (src/kvledger/dynamics/fast/stretch_core.c) when a C compiler is at hand.

A failed or missing compiler is not an error: the wheel is then pure Python and kvledger runs its pure-Python
fallback, which gives the same bytes (kvledger/dynamics/fast/native.py). ``pip install -e .`` compiles the module next
to its source (the editable install imports from src/); ``pip install .`` puts it in the wheel. The flags keep every
float operation as written (no contraction into fused multiply-adds, no fast-math), so results are byte-identical
with and without it. ``CC`` picks the compiler (``CC=/bin/false`` hides it); ``KVLEDGER_PURE_PYTHON=1`` at build time
skips the compile.

    python hatch_build.py          # compile in place (a source checkout run with PYTHONPATH=src)
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SOURCE = ROOT / "src" / "kvledger" / "dynamics" / "fast" / "stretch_core.c"
MODULE = "kvledger/dynamics/fast/stretch_core"
FLAGS = ["-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-std=c11", "-Wall"]


def compile_core(out_dir: Path) -> Path | None:
    """Compile ``stretch_core.c`` into ``out_dir``; the module's path, or None (the reason on stderr) when it fails."""
    if os.environ.get("KVLEDGER_PURE_PYTHON", "") not in ("", "0"):
        return None
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = out_dir / f"stretch_core{suffix}"
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    extra = ["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else []
    cmd = [*cc, *FLAGS, *extra, "-I", sysconfig.get_paths()["include"], str(SOURCE), "-o", str(target)]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        print(f"kvledger: the optional C core was not compiled ({detail}); the pure-Python path is used",
              file=sys.stderr)
        return None
    return target


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, outside a build
    BuildHookInterface = object


class CoreBuildHook(BuildHookInterface):
    """Hatchling's custom wheel hook (pyproject: ``[tool.hatch.build.targets.wheel.hooks.custom]``)."""

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or sys.platform == "win32":
            return
        if version == "editable":  # imported from src/: compile next to the source
            compile_core(SOURCE.parent)
            return
        built = compile_core(ROOT / "build" / "kvledger-core")
        if built is not None:
            build_data["force_include"][str(built)] = MODULE + built.name.removeprefix("stretch_core")
            build_data["pure_python"] = False
            build_data["infer_tag"] = True


if __name__ == "__main__":
    path = compile_core(SOURCE.parent)
    print(path or "not compiled")
    sys.exit(0 if path else 1)
