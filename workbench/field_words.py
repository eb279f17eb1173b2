"""A refused value in the words of whoever typed it: the CLI's flag (``--window 64: …``), the
window's field label (``Window 64: …``) or the Python API's keyword (``window=64: …``).

The core raises one :class:`~workbench.config.ConfigError` naming its field; this module knows
each field's flag and label (the knobs' from the registry, the problem's here), so no front end
shows an internal field name, a ``True`` for a switch, or a Python list for a comma list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kernels import knobs

# The problem's and sweep's fields, as the CLI flag that sets each and the window's label.
FIELD_FLAGS: Mapping[str, str] = {
    "batch": "--batch",
    "heads": "--heads",
    "kv_heads": "--kv-heads",
    "head_dim": "--head-dim",
    "head_dim_v": "--head-dim-v",
    "dtype": "--dtype",
    "seq_lens": "--seq-lens",
    "q_len": "--seq-lens",
    "k_len": "--seq-lens",
    "k_lens": "--k-lens",
    "input_pos": "--input-pos",
    "mask": "--mask",
    "window": "--window",
    "backend": "--backend",
    "backends": "--backends",
    "label": "--label",
    "preset": "--preset",
    "lengths": "--lengths",
    "lengths_file": "--lengths-file",
    "page_size": "--page-size",
    "kv_cache": "--kv-cache",
    "shared_pages": "--shared-pages",
    "varlen": "--lengths",
}
# Other flags that set the same field: the refusal names the one the user typed.
ALSO_SET_BY: Mapping[str, tuple[str, ...]] = {
    "backends": ("--backend",),
    "backend": ("--backends",),
    "q_len": ("--q-len", "--k-lens"),
    "k_len": ("--k-len", "--k-lens"),
    "seq_lens": ("--k-lens",),
    "lengths": ("--lengths-file", "--preset"),
}
FIELD_LABELS: Mapping[str, str] = {
    "batch": "Batch",
    "heads": "Heads",
    "kv_heads": "KV heads",
    "head_dim": "Head dim",
    "head_dim_v": "Head dim V",
    "dtype": "Dtype",
    "seq_lens": "Seq lengths",
    "q_len": "Seq lengths",
    "k_len": "Seq lengths",
    "k_lens": "Seq lengths",  # a decode sweep's lengths are the same field
    "input_pos": "Offset",
    "mask": "Mask",
    "window": "Window",
    "backend": "Backends",
    "backends": "Backends",
    "label": "Label",
    "lengths": "Lengths",
    "lengths_file": "Lengths",
    "page_size": "Page size",
    "kv_cache": "KV cache",
    "shared_pages": "Shared pages",
    "varlen": "Lengths",
}


def flag_of(field: str, typed: Sequence[str] = ()) -> str | None:
    """The CLI flag that sets ``field`` (a knob's from the registry), or None; of the flags
    that set it, the one among the ``typed`` words where one is."""
    knob = knobs.KNOBS.get(field)
    primary = knob.flag if knob is not None and knob.flag else FIELD_FLAGS.get(field)
    for flag in (primary, *ALSO_SET_BY.get(field, ())):
        if flag and any(w == flag or w.startswith(flag + "=") for w in typed):
            return flag
    return primary


def label_of(field: str) -> str | None:
    """The window's label of the field that sets ``field`` (a knob's from the registry)."""
    knob = knobs.KNOBS.get(field)
    return knob.label if knob is not None else FIELD_LABELS.get(field)


def _typed(value: Any) -> str:
    """A value as it was typed: a list as its comma list, text without Python's quotes."""
    text = ",".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)
    # A newline or tab typed into a value stays on the error's one line, escaped.
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _switch_advice(field: str, value: Any, flag: str) -> str:
    """What to do about a refused switch: leave it out (its default is what runs then)."""
    knob = knobs.KNOBS.get(field)
    if knob is None or knob.kind is not bool or value == knob.default:
        return ""
    return f"; leave {flag} out" if value else f"; leave --no-{flag[2:]} out"


def _in_flags(text: str) -> str:
    """Field names in a reason as the flags a user types (``kv_heads`` → ``--kv-heads``)."""
    text = re.sub(r"\bmask '?(none|causal|window)'?(?= |$|\)|,|;|:)", r"--mask \1", text)
    names = {**FIELD_FLAGS, **{k.name: k.flag for k in knobs.KNOBS.values() if k.flag}}
    for name, flag in names.items():
        if "_" in name:  # a field name no user types; a one-word name may be prose
            text = re.sub(rf"\b{name}\b", flag, text)
    return text


def _in_labels(text: str) -> str:
    """Field names in a reason as the window's labels (``kv_heads`` → ``KV heads``)."""
    text = re.sub(r"\bmask '?(none|causal|window)'?(?= |$|\)|,|;|:)", r"Mask \1", text)
    names = {**FIELD_LABELS, **{k.name: k.label for k in knobs.KNOBS.values()}}
    for name, label in names.items():
        if "_" in name:
            text = re.sub(rf"\b{name}\b", label, text)
    return text


def cli_words(field: str, value: Any, allowed: str, typed: Sequence[str] = ()) -> str:
    """``--window 64: a window size needs --mask window …``: the flag (the one of ``typed``
    where several set the field) and the value as typed (a switch alone), why, what to do."""
    flag = flag_of(field, typed)
    if flag is None:
        return api_words(field, value, allowed)
    if field == "window" and value is None:
        return "--mask window needs --window W (each query sees the W most recent keys)"
    knob = knobs.KNOBS.get(field)
    if knob is not None and knob.kind is bool and isinstance(value, bool):
        said = flag if value else f"--no-{flag[2:]}"
    else:
        shown = knob.text(value) if knob is not None else _typed(value)
        said = f"{flag} {shown}" if shown else f"{flag} ''"
    # The flag and value lead, so a reason that opens by restating them drops that.
    allowed = allowed.removeprefix(f"backend {value!r} is ")
    return f"{said}: {_in_flags(allowed)}{_switch_advice(field, value, flag)}"


def form_words(field: str, value: Any, allowed: str) -> str:
    """``Window 64: a window size needs Mask window``: the field's label, the value, why."""
    label = label_of(field)
    if label is None:
        return api_words(field, value, allowed)
    if field == "window" and value is None:
        return "Window: Mask window needs a window size of 1 or more"
    knob = knobs.KNOBS.get(field)
    if knob is not None and knob.kind is bool and isinstance(value, bool):
        said = f"{label} {'on' if value else 'off'}"
    elif knob is not None:
        said = f"{label} {knob.text(value)}"
    else:
        said = f"{label} {value!r}" if isinstance(value, str) else f"{label} {_typed(value)}"
    return f"{said}: {_in_labels(allowed)}"


def api_words(field: str, value: Any, allowed: str) -> str:
    """``window=64: …``: the keyword a Python caller passed, and its value."""
    return f"{field}={value!r}: {allowed}"
