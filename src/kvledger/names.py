"""The one check every name-or-path the user types goes through before it touches the file system."""

from __future__ import annotations

from kvledger.errors import InputError

__all__ = ["check_name_or_path", "NAME_MAX_BYTES", "PATH_MAX_BYTES"]

NAME_MAX_BYTES = 255
"""Longest file name (one path component) on common file systems (ext4, XFS, APFS, NTFS), bytes."""
PATH_MAX_BYTES = 4096
"""Longest path Linux accepts (PATH_MAX), bytes."""


def check_name_or_path(text: str, what: str) -> None:
    """Raise InputError when ``text`` cannot name anything: empty, a NUL byte, a component over 255 bytes, or over
    4,096.

    ``what`` names the input in the message ("trace", "model", "GPU").
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{what}: give a name or a path")
    raw = text.encode("utf-8", "surrogatepass")
    if b"\x00" in raw or len(raw) > PATH_MAX_BYTES or any(
            len(part.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES for part in text.replace("\\", "/").split("/")):
        raise InputError(f"{what} {text[:60]!r}...: not a usable name or path (a NUL byte, a name or path component "
                         f"longer than {NAME_MAX_BYTES} bytes, or a path longer than {PATH_MAX_BYTES:,} bytes)")
