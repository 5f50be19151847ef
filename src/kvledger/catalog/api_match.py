"""Which API price rows serve a given model (matched by family, version and size words); word look-up of ``--api``.

A name is cut into lower-case words at every character other than a letter, digit or dot, after writing the
providers' version spellings the same way (``v3p1`` → ``3.1``, a leading ``v`` before a digit dropped) and dropping
the organisation (``meta-llama/``). A row serves the model when every identifying word of the model's name (all but
variant words such as instruct, chat, turbo, hf) is among the row's words: ``meta-llama/Llama-3.1-8B`` (llama, 3.1,
8b) is served by Together ``Meta-Llama-3.1-8B-Instruct-Turbo``, Groq ``llama-3.1-8b-instant`` and Fireworks
``llama-v3p1-8b-instruct``, not by ``Llama-3.3-70B``. API rows serve instruct tunes, sometimes quantized (Together's
"Turbo" rows are FP8); the match is on the base weights' family, version and size.
"""

from __future__ import annotations

import re

from kvledger.catalog.prices import ApiPrice, api_prices
from kvledger.errors import InputError, UnknownNameError, suggest

__all__ = ["name_words", "same_model_rows", "rows_with_words", "find_api_price", "require_api_row", "LIST_API_ROWS"]

VARIANT_WORDS = frozenset(
    {
        "instruct",
        "chat",
        "turbo",
        "hf",
        "base",
        "it",
        "instant",
        "versatile",
        "fp8",
        "bf16",
        "original",
        "list",
        "preview",
        "latest",
        "meta",
    }
)


def name_words(name: str) -> list[str]:
    """The words of a model or row name, versions normalized (``Meta-Llama-3.1-8B`` → meta, llama, 3.1, 8b)."""
    s = name.lower().split("/")[-1] if "/" in name and " " not in name else name.lower()
    s = re.sub(r"(\d)p(\d)", r"\1.\2", s)
    words = [w.strip(".") for w in re.split(r"[^a-z0-9.]+", s) if w.strip(".")]
    return [w[1:] if re.fullmatch(r"v\d[\d.]*", w) else w for w in words]


def _row_words(row: ApiPrice) -> set[str]:
    return {w for part in row.model.replace("(", " ").replace(")", " ").split() for w in name_words(part)} | set(
        name_words(row.model)
    )


def same_model_rows(model: str, *, with_historical: bool = False) -> list[ApiPrice]:
    """Rows whose model serves ``model`` (an HF id or name): every identifying word of it among the row's words; a
    historical list price (``ApiPrice.historical``: no longer offered) only ``with_historical`` (is a named row the
    same model), never as a row to compare with by default."""
    ident = [w for w in name_words(model) if w not in VARIANT_WORDS]
    if len(ident) < 2:  # one word (e.g. "llama") says too little to call two models the same
        return []
    return [r for r in api_prices() if set(ident) <= _row_words(r) and (with_historical or not r.historical)]


def rows_with_words(query: str, provider: str | None = None) -> list[ApiPrice]:
    """Rows of ``provider`` (any when None) whose words contain every word of ``query`` as a prefix or substring
    (``llama-8b`` → llama…, 8b), for suggestions when ``--api`` names no row exactly."""
    q = [w for w in name_words(query) if w]
    rows = [r for r in api_prices() if provider is None or r.provider.lower() == provider.strip().lower()]
    return [r for r in rows if q and all(any(w in rw for rw in _row_words(r)) for w in q)]


LIST_API_ROWS = ("kvledger prices --kind api lists every API row (PROVIDER:MODEL, as --api takes it; --provider NAME "
                 "for one provider's)")


def _provider_hint(provider: str | None, rows: list[ApiPrice]) -> str:
    """"no API provider 'Grok' (did you mean Groq?); " for a provider no row has, "" otherwise."""
    known = sorted({r.provider for r in rows})
    if provider is None or provider.strip().lower() in (k.lower() for k in known):
        return ""
    close = suggest(provider.strip(), known)
    return (f"no API provider {provider.strip()!r} ("
            + (f"did you mean {' or '.join(close)}?" if close else f"the catalog's: {', '.join(known)}") + "); ")


def find_api_price(name: str, provider: str | None = None) -> ApiPrice:
    """The API row for ``name`` (``"gpt-4.1"``, ``"OpenAI:gpt-4.1"``, ``"Groq:openai/gpt-oss-120b"``), case-insensitive.

    Raises:
        UnknownNameError: no row has that model (close names suggested).
        InputError: several providers list it and none was given (the candidates are named).
    """
    if provider is None and ":" in name:
        provider, name = name.split(":", 1)
    rows = api_prices()
    key = name.strip().lower()
    hits = [r for r in rows if key in (a.lower() for a in r.aliases) or key == r.model.lower()]
    if provider is not None:
        hits = [r for r in hits if r.provider.lower() == provider.strip().lower()]
    if not hits:
        given = name if provider is None else f"{provider}:{name}"
        words = rows_with_words(name, provider) or rows_with_words(name)
        if words:  # the provider's and model's words name rows: suggest those (Together:llama-8b → Together's 8B row)
            found = f"rows with those words: {', '.join(r.key for r in words[:6])}; "
            raise UnknownNameError("API model", given, [], hint=_provider_hint(provider, rows) + found + LIST_API_ROWS)
        raise UnknownNameError("API model", given, [r.key for r in rows] + [a for r in rows for a in r.aliases],
                               hint=_provider_hint(provider, rows) + LIST_API_ROWS)
    if len(hits) > 1:
        raise InputError(f"API model {name!r} is listed by several providers: {', '.join(r.key for r in hits)}; name "
                         f"one, e.g. {hits[0].key!r}")
    return hits[0]


def require_api_row(model: str) -> None:
    """Refuse ``model`` when no catalog API row serves it and none was named (``report`` compares with an API; ``cost``
    gives the self-hosted ledger alone instead): before the capacity search, which takes minutes.

    Raises:
        InputError: no row serves the model.
    """
    from kvledger.errors import InputError

    if not same_model_rows(model):
        raise InputError(f"no API row to compare with: no catalog row serves {model}; name a comparable model's with "
                         "--api PROVIDER:MODEL (kvledger prices --kind api lists them), or for the self-hosted ledger "
                         f"alone run kvledger cost --simulate {model} with the same flags; refused before simulating")
