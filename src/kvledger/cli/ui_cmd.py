"""``kvledger ui``: serve the local web app (FastAPI + uvicorn) on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["register"]


def ui(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default loopback only; 0.0.0.0 exposes it "
                                                         "to the network)."),
    port: int = typer.Option(8765, "--port", help="TCP port."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Folder whose config, GPU and trace files requests "
                                                                  "may name (relative paths start there; its model "
                                                                  "configs and GPU files are listed in the form); "
                                                                  "without it "
                                                                  "the app reads bundled models, catalog GPUs and "
                                                                  "bundled traces only."),
) -> None:
    """A local web app: pick model, GPU, engine, TP, context, KV dtype, SLOs, API row and traffic; see the plan,
    concurrency, cost and figures update."""
    import uvicorn

    from kvledger.errors import InputError
    from kvledger.report.webapp import create_app
    from kvledger.report.webapp_guard import LOOPBACK

    if data_dir is not None and not data_dir.is_dir():
        raise InputError(f"--data-dir {data_dir}: not a folder")
    _check_free(host, port)
    token = None
    if host not in LOOPBACK:  # reachable from other machines: say so, and require a token nobody else has
        import secrets

        token = secrets.token_urlsafe(18)
        typer.echo(f"warning: --host {host} exposes the app beyond this machine (anyone who can reach it can run "
                   "simulations); every request must carry the token in the URL below", err=True)
    url = f"http://{host}:{port}/" + (f"?token={token}" if token else "")
    typer.echo(f"kvledger ui on {url} (Ctrl-C to stop)")
    uvicorn.run(create_app(data_dir, token=token), host=host, port=port, log_level="warning")


def _check_free(host: str, port: int) -> None:
    """Raise InputError when ``host:port`` cannot be bound (in use, or not an address of this machine)."""
    import socket

    from kvledger.errors import InputError

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.bind((host, port))
    except OSError as err:
        raise InputError(
            f"cannot listen on {host}:{port} ({err.strerror or err}); choose another --port or --host"
        ) from None


def register(app: typer.Typer) -> None:
    """Add ``ui`` to the app."""
    app.command("ui")(ui)
