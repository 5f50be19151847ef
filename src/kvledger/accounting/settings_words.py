"""A pydantic validation failure of the plan settings in words: the allowed values or bounds, not pydantic's wording
(``settings.make_settings`` and the web app's forms)."""

from __future__ import annotations

import math

__all__ = ["reason_in_words", "settings_error"]

#: settings whose command-line flag is not the field's name with dashes
FLAGS = {"contexts": "--context", "weights_bytes": "--weights-memory",
         "available_kv_memory_bytes": "--available-kv-memory", "activation_peak_bytes": "--activation-peak",
         "non_torch_bytes": "--non-torch-memory", "cudagraph_bytes": "--cudagraph-memory",
         "cpu_overhead_s": "--cpu-overhead", "trtllm_logits_dtype": "--logits-dtype"}


def reason_in_words(e: dict) -> str:
    """One pydantic validation failure (an item of ``ValidationError.errors()``) in words: the allowed values or
    bounds, not pydantic's wording."""
    ctx, kind, value = e.get("ctx") or {}, e.get("type", ""), e.get("input")
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    bounds = {"greater_than": "> {gt}", "greater_than_equal": "≥ {ge}", "less_than": "< {lt}",
              "less_than_equal": "≤ {le}"}
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    if kind in bounds:
        return "must be " + bounds[kind].format(**{k: f"{v:,}" if isinstance(v, int) else f"{v:,g}"
                                                   if isinstance(v, float) else v for k, v in ctx.items()})
    if kind == "finite_number":
        return "must be a finite number"
    if kind.startswith(("int_", "float_")):
        return "must be a whole number" if kind.startswith("int_") else "must be a number"
    return str(e.get("msg", "is not valid")).replace("Value error, ", "")


def _name(loc: tuple, fields: frozenset[str], cli: bool) -> str:
    """The setting a failure is about: its flag on the command line (``--context``), else the Python name, an item by
    index (``contexts[0]``)."""
    if not loc:
        return "settings"
    head, rest = str(loc[0]), "".join(f"[{x}]" for x in loc[1:])
    if not cli:
        return head + rest
    return FLAGS.get(head, "--" + head.replace("_", "-")) if head in fields else "--" + head.replace("_", "-")


def settings_error(err, fields: frozenset[str], cli: bool):
    """pydantic's ValidationError of the plan settings as one InputError naming each setting: by its flag when a
    command runs (``cli``), else by its Python name; an unknown name with the closest field."""
    import difflib

    from kvledger.errors import InputError

    msgs = []
    for e in err.errors():
        name = _name(tuple(e["loc"]), fields, cli)
        if e.get("type") == "extra_forbidden":
            near = difflib.get_close_matches(str(e["loc"][0]), sorted(fields), n=1)
            hint = f" (did you mean {near[0] if not cli else _name((near[0],), fields, cli)}?)" if near else ""
            msgs.append(f"{name} is not a setting{hint}")
        elif e.get("type") == "value_error":  # our own validator's sentence, which names the value
            msgs.append(f"{name}: {reason_in_words(e)}")
        elif str(e["loc"][-1] if e["loc"] else "").endswith("_bytes") and isinstance(e.get("input"), int):
            gib = {k: v / 2**30 for k, v in (e.get("ctx") or {}).items() if isinstance(v, int)}
            msgs.append(f"{name} {reason_in_words({**e, 'ctx': gib})} GiB, got {e['input'] / 2**30:,.2f} GiB")
        else:
            got = e.get("input")
            shown = f"{got:,}" if isinstance(got, int) and not isinstance(got, bool) else repr(got)
            msgs.append(f"{name} {reason_in_words(e)}, got {shown}")
    return InputError("invalid setting: " + "; ".join(msgs))
