"""Output locations for the commands: the checks and atomic writes of :mod:`kvledger.outputs`, under their CLI name."""

from kvledger.outputs import (
    prepare_output_dir,
    prepare_output_file,
    write_atomic,
    write_bytes_atomic,
    write_text_atomic,
)

__all__ = ["prepare_output_file", "prepare_output_dir", "write_atomic", "write_bytes_atomic", "write_text_atomic"]
