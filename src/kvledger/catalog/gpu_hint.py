"""What an unknown ``--gpu`` should be instead (``catalog.gpus.get_gpu``'s hint), naming only the options of the
command being run."""

from __future__ import annotations

__all__ = ["ADJUST_COMMANDS", "unknown_gpu_hint"]


#: the commands that take --gpu-memory/--gpu-bandwidth/--gpu-bf16-tflops (``cli/plan_flags.py``)
ADJUST_COMMANDS = ("plan",)


def unknown_gpu_hint(command: str | None = None) -> str:
    """What an unknown --gpu should be instead, naming only the options ``command`` has (default: the command being
    run, ``errors.COMMAND``; None outside one: every option): a GPU file, and where the command takes them, a catalog
    GPU adjusted with --gpu-memory/--gpu-bandwidth/--gpu-bf16-tflops."""
    from kvledger.errors import COMMAND

    command = command or COMMAND.get()
    adjust = command is None or command in ADJUST_COMMANDS
    return ("Run `kvledger gpus` for the catalog; for another GPU pass --gpu FILE.json/.toml (fields: name, memory as "
            "CUDA reports it, e.g. \"79.19GiB\", bandwidth_tb_s, bf16_tflops[, fp8_tflops, base])"
            + (", or a catalog GPU adjusted with --gpu-memory/--gpu-bandwidth/--gpu-bf16-tflops" if adjust else "")
            + ".")
