"""The one parser for a length or a count of tokens, wherever one is typed: every CLI flag
(``--k-len 32k``, ``--k-lens 1k-4k``), the window's length fields and the Python API's strings.

A size is a whole number in ASCII digits with an optional unit: ``k``/``K`` = 1024 and
``m``/``M`` = 1024² (tokens come in powers of two, so 32k is 32,768). A comma never groups
digits ("1,024"): it separates the items of a list, and the same text must mean one thing
everywhere.
"""

from __future__ import annotations

import argparse
import re

UNITS = {"": 1, "k": 1024, "m": 1024 * 1024}
# What every refusal of a size says it expected, at the CLI and in the window alike.
SIZE_EXPECTED = "expected a whole number such as 4096, 32k or 1M (k = 1024, M = 1024²)"
# SQLite's integers are 64-bit: a larger length cannot be stored, nor named.
INT64_MAX = 2**63 - 1
_SIZE = re.compile(r"([+-]?)([0-9]+)([kKmM]?)")


class SizeError(ValueError):
    """Text that is not a size: the message quotes it and says what a size looks like."""


def size_problem(text: str) -> str:
    """Why ``text`` is not a size: one line, quoting it."""
    stripped = text.strip()
    if re.fullmatch(r"[0-9]{1,3}(,[0-9]{3})+", stripped):
        plain = stripped.replace(",", "")
        return f"{SIZE_EXPECTED}; got {text!r} (a comma separates lists: write {plain})"
    return f"{SIZE_EXPECTED}; got {text!r}"


def parse_size(text: str) -> int:
    """``"32k"`` → 32768, ``"1M"`` → 1048576, ``"4096"`` → 4096 (a sign is kept, so a range
    check can say what is wrong with ``-5``). Raises :class:`SizeError` naming ``text``."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise SizeError(size_problem(text))
    sign, digits, unit = match.groups()
    value = int(digits) * UNITS[unit.lower()]
    return -value if sign == "-" else value


def size_arg(text: str) -> int:
    """:func:`parse_size` as an argparse ``type``: argparse prefixes the flag to the message."""
    try:
        value = parse_size(text)
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if abs(value) > INT64_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range (at most {INT64_MAX:,})")
    return value
