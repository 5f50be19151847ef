"""The flags that take a token count (read by ``units.parse_tokens``, vLLM's suffixes) and the note a lowercase
suffix on one of them earns, said on stderr before the command runs so that ``--json`` stays one document."""

from __future__ import annotations

import sys

__all__ = ["TOKEN_FLAGS", "suffix_notes", "print_suffix_notes"]

#: every flag whose value (or comma-separated values) ``units.parse_tokens`` reads, the engine's and kvledger's own
#: (tests/cli/test_token_flags.py checks the list against the source's parse calls)
TOKEN_FLAGS = ("--max-model-len", "--max-num-batched-tokens", "--context", "--contexts", "--flip-contexts",
               "--prompt-tokens", "--window", "--prefill-max-num-batched-tokens",
               "--tune-prefill-max-num-batched-tokens")


def suffix_notes(argv: list[str]) -> list[str]:
    """One note per token-flag value with a lowercase suffix in ``argv`` (``units.token_suffix_note``), in order;
    both ``--flag VALUE`` and ``--flag=VALUE``; the words after ``--`` are not flags."""
    from kvledger.units import token_suffix_note

    words = argv[: argv.index("--")] if "--" in argv else argv
    out = []
    for n, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag not in TOKEN_FLAGS:
            continue
        if not eq:
            if n + 1 >= len(words):
                continue
            value = words[n + 1]
        for item in value.split(","):
            note = token_suffix_note(item, what=flag)
            if note is not None:
                out.append(note)
    return out


def print_suffix_notes(argv: list[str]) -> None:
    """:func:`suffix_notes` on stderr, one ``note:`` line each."""
    for note in suffix_notes(argv):
        sys.stderr.write(f"note: {note}\n")
