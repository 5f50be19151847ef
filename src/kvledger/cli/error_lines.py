"""How the CLI says an error: one line on stderr, ``error: MESSAGE``, for kvledger's own errors and click's usage
errors alike (a usage error names the help to read), and with ``--json`` the same message as a strict-JSON object on
stdout, so that a script reading stdout gets JSON."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

__all__ = ["say_error", "json_error", "usage_error"]


def say_error(message: str) -> None:
    """``error: MESSAGE`` on stderr, one line however long (rich markup in the message escaped)."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False, emoji=False).print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def json_error(message: str, exit_code: int, kind: str, detail: dict | None = None) -> None:
    """With ``--json``, an error is also a strict-JSON object on stdout:
    ``{"error": {"message": …, "type": "InputError", "exit_code": 2}}`` (the message is on stderr as well); a
    NoAnswerError's ``payload`` (what the command can say, e.g. the requests max_model_len refuses) under ``detail``."""
    from kvledger import strict_json

    err = {"message": message, "type": kind, "exit_code": exit_code} | ({"detail": detail} if detail else {})
    sys.stdout.write(strict_json.dumps({"error": err}) + "\n")
    sys.stdout.flush()


def usage_error(err: Any, as_json: bool) -> NoReturn:
    """Say click's error ``err`` in one line, ``error: MESSAGE (see 'kvledger CMD --help')`` (click's own handling
    prints a four-line block), and exit with its status (2 for a usage error); a bare command prints its help, as click
    does."""
    import typer

    from kvledger.cli.broken_pipe import will_end_with

    will_end_with(err.exit_code)  # kept when stderr or stdout is a pipe whose reader has gone (`2>&1 | head -0`)
    from kvledger.cli.serve_flags import serve_only_message

    ctx = getattr(err, "ctx", None)
    serve = serve_only_message(getattr(err, "option_name", None), ctx.command_path if ctx is not None else "kvledger")
    if as_json:
        from kvledger.cli.number_words import number_words

        json_error(serve or number_words(err) or err.format_message() + _other_name(err, ctx), err.exit_code,
                   type(err).__name__)
    if type(err).__name__ == "NoArgsIsHelpError":  # a bare command: its help, as click prints it
        typer.echo(err.format_message(), err=True)
        sys.exit(err.exit_code)
    from kvledger.cli.number_words import number_words

    said = serve or err.format_message().removesuffix(".") + _other_name(err, ctx)  # click ends some with a period
    said = number_words(err) or said  # a number option given something else: the flag, the value, an example
    say_error(said + (f" (see '{ctx.command_path} --help')" if ctx is not None else ""))
    sys.exit(err.exit_code)


#: a flag → the flag that says the same in the commands that lack it: `plan --engine sglang` is `simulate --policy
#: sglang` (the simulator's preset names the scheduler to replay), and the other way round
_OTHER_NAMES = {"--engine": "--policy", "--policy": "--engine"}


def _other_name(err: Any, ctx: Any) -> str:
    """For an unknown option that another command takes under another name, where this command takes that name:
    which flag to write instead, e.g. ``; kvledger simulate picks the engine with --policy (e.g. --policy sglang)``."""
    other = _OTHER_NAMES.get(getattr(err, "option_name", None) or "")
    if ctx is None or other is None or not any(other in p.opts for p in ctx.command.params):
        return ""
    return f"; {ctx.command_path} picks the engine with {other} (e.g. {other} sglang)"

