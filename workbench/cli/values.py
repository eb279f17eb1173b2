"""The command line's value types (argparse ``type=`` functions) and its bad-input error: each
refuses a value in words naming what was typed."""

from __future__ import annotations

import argparse
import math
import re


class UsageError(Exception):
    """Bad input: one line on stderr, exit 2."""


# SQLite's integers are 64-bit: a larger id cannot name anything, and overflows on the way in.
INT64_MAX = 2**63 - 1
MAX_SEARCH_CHARS = 200


def whole(text: str) -> int:
    """A whole number in ASCII digits within SQLite's 64-bit range (``int`` alone takes
    fullwidth and Arabic-Indic digits, spaces and underscores)."""
    stripped = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", stripped):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    value = int(stripped)
    if abs(value) > INT64_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range (at most {INT64_MAX})")
    return value


def run_id(text: str) -> int:
    """A run or group id: a whole number from 1."""
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"ids start at 1, got {text!r}")
    return value


def at_least_zero(text: str) -> int:
    value = whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text!r}")
    return value


def finite(text: str) -> float:
    """A finite number (``float`` alone takes inf and nan)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or not text.isascii():
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def search_text(text: str) -> str:
    if len(text) > MAX_SEARCH_CHARS:
        raise argparse.ArgumentTypeError(
            f"a search of {len(text):,} characters; at most {MAX_SEARCH_CHARS}"
        )
    return text


def run_ids(text: str) -> list[int]:
    """Comma-separated run ids, each once."""
    tokens = [t.strip() for t in text.split(",")]
    if not any(tokens):
        raise argparse.ArgumentTypeError("expected comma-separated run ids, got none")
    if not all(tokens):
        raise argparse.ArgumentTypeError(f"expected comma-separated run ids, got {text!r}")
    ids = [run_id(t) for t in tokens]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(
            f"run {', '.join(map(str, repeated))} given more than once in {text!r}"
        )
    return ids


_SIZE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "ki": 2**10, "mi": 2**20, "gi": 2**30}
# A read below a megabyte times the launch, not the memory; above 32 GB it does not fit the GPU.
READ_SIZE_RANGE = (10**6, 32 * 10**9)


def byte_sizes(text: str) -> list[int]:
    """Comma-separated byte counts with an optional unit (k, M, G or Ki, Mi, Gi; e.g. 134M)."""
    sizes = []
    for token in (t.strip() for t in text.split(",")):
        number = token.rstrip("kKmMgGiI")
        unit = _SIZE_UNITS.get(token[len(number) :].lower())
        try:
            size = int(float(number) * unit) if unit and number else None
        except ValueError:
            size = None
        if size is None:
            raise argparse.ArgumentTypeError(f"expected sizes such as 32M,134M,2Gi, got {token!r}")
        low, high = READ_SIZE_RANGE
        if not low <= size <= high:
            raise argparse.ArgumentTypeError(f"{token} is {size:,} bytes: expected 1M to 32G")
        sizes.append(size)
    return sizes
