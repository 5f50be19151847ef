"""Providers of the price tables: a ``--provider`` or ``--gpu-provider`` no row has is refused, naming those known,
the closest first (the unknown-GPU refusal is ``catalog.prices.find_gpu_prices``'s)."""

from __future__ import annotations

from collections.abc import Iterable

from kvledger.errors import UnknownNameError

__all__ = ["gpu_providers", "check_gpu_provider", "gpu_provider_label", "gpu_provider_problems", "check_provider"]


def gpu_providers() -> list[str]:
    """The providers of the GPU rental rows, sorted."""
    from kvledger.catalog.prices import gpu_prices

    return sorted({r.provider for r in gpu_prices()})


def check_provider(provider: str | None, known: Iterable[str], what: str = "GPU price provider") -> None:
    """Refuse ``provider`` when none of ``known`` has its name (case-insensitive), listing them, the closest first.

    Raises:
        UnknownNameError: an unknown provider.
    """
    names = sorted(set(known))
    if provider is None or provider.strip().lower() in (k.lower() for k in names):
        return
    raise UnknownNameError(what, provider, names, hint=f"(the price tables' providers: {', '.join(names)})")


def check_gpu_provider(provider: str | None) -> str | None:
    """A ``--gpu-provider`` as the price table spells it (None: none given); refused when no GPU rental row has it
    (also where ``--gpu-usd-per-hour`` sets the price: the provider then only labels it).

    Raises:
        UnknownNameError: an unknown provider.
    """
    known = gpu_providers()
    check_provider(provider, known)
    return None if provider is None else next(k for k in known if k.lower() == provider.strip().lower())


def gpu_provider_label(provider: str | None) -> str | None:
    """The price table's spelling of ``provider`` (``nebius`` → Nebius), as given when it has none."""
    try:
        return check_gpu_provider(provider)
    except UnknownNameError:
        return provider


def gpu_provider_problems(provider: str | None) -> list[str]:
    """``check_gpu_provider``'s refusal as text, [] for a known provider (or none): for a list of input problems."""
    try:
        check_gpu_provider(provider)
    except UnknownNameError as err:
        return [str(err)]
    return []
