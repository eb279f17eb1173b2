"""A ragged batch as a user states it: a list of lengths (``300,30000,1k``), a seeded
distribution (``lognormal:n=64,mean=4k,max=32k,seed=1``, ``uniform:n=8,min=1k,max=8k``) or a
file of lengths (CSV or JSON, e.g. exported from a serving log).

Every refusal is a :class:`~workbench.config.ConfigError` on the field ``lengths`` (or
``lengths_file``), which each front end words with its flag or label and the text as typed.
Each length is a size (:mod:`workbench.sizes`: k = ×1024); zero is allowed (an empty request).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from statistics import NormalDist

import numpy as np

from workbench.batch_lengths import MAX_SEQUENCES
from workbench.config import MAX_SEQ_LEN, ConfigError
from workbench.sizes import SizeError, parse_size

DISTRIBUTIONS = ("lognormal", "uniform")
# Each distribution's keys: those it needs, then those it may take (with their defaults).
REQUIRED_KEYS: Mapping[str, tuple[str, ...]] = {
    "lognormal": ("n", "mean", "max"),
    "uniform": ("n", "min", "max"),
}
OPTIONAL_KEYS: Mapping[str, Mapping[str, str]] = {
    "lognormal": {"min": "1", "seed": "0", "sigma": ""},
    "uniform": {"seed": "0"},
}
# The column a CSV file with a header may name its lengths by (a one-column file needs none).
LENGTH_COLUMNS = ("length", "lengths", "seq_len", "seq_lens", "tokens", "num_tokens", "kv_len")
LISTED = "expected lengths like 300,30000,1k, lognormal:n=64,mean=4k,max=32k,seed=1 or " \
    "uniform:n=8,min=1k,max=8k,seed=1"  # fmt: skip


def parse_lengths(text: str, field: str = "lengths") -> tuple[int, ...]:
    """The lengths ``text`` states: a comma list or a distribution (see the module's doc)."""
    stated = text.strip()
    head, colon, rest = stated.partition(":")
    if colon and head.strip().lower() in DISTRIBUTIONS:
        return _distribution(head.strip().lower(), rest, text, field)
    if colon:
        raise ConfigError(field, text, f"{head.strip()!r} is no distribution; {LISTED}")
    items = [item.strip() for item in stated.split(",")]
    if not stated or not all(items):
        raise ConfigError(field, text, f"an empty length; {LISTED}")
    return _checked([_length(item, text, field) for item in items], text, field)


def _length(item: str, text: str, field: str) -> int:
    try:
        value = parse_size(item)
    except SizeError:
        raise ConfigError(
            field, text, f"{item!r} is not a length (a whole number such as 300, 4096 or 32k)"
        ) from None
    if value < 0:
        raise ConfigError(field, text, f"a length of {value}; a sequence has 0 or more tokens")
    if value > MAX_SEQ_LEN:
        raise ConfigError(field, text, f"a length of {value:,}; at most {MAX_SEQ_LEN:,} (1M)")
    return value


def _checked(lengths: list[int], text: str, field: str) -> tuple[int, ...]:
    if len(lengths) > MAX_SEQUENCES:
        raise ConfigError(
            field, text, f"{len(lengths):,} sequences; a batch holds at most {MAX_SEQUENCES:,}"
        )
    if not any(lengths):
        raise ConfigError(field, text, "every sequence is empty (0 tokens): nothing to attend")
    return tuple(lengths)


def _distribution(kind: str, rest: str, text: str, field: str) -> tuple[int, ...]:
    """``n=64,mean=4k,max=32k,seed=1``: the seeded draw of ``kind``."""
    given: dict[str, str] = {}
    for item in (part.strip() for part in rest.split(",")):
        key, equals, value = item.partition("=")
        key = key.strip().lower()
        allowed = (*REQUIRED_KEYS[kind], *OPTIONAL_KEYS[kind])
        if not equals or not value.strip():
            raise ConfigError(field, text, f"{item!r} is not key=value ({kind} takes "
                              f"{', '.join(allowed)})")  # fmt: skip
        if key not in allowed:
            raise ConfigError(field, text, f"{kind} has no {key!r}; it takes {', '.join(allowed)}")
        given[key] = value.strip()
    missing = [key for key in REQUIRED_KEYS[kind] if key not in given]
    if missing:
        raise ConfigError(field, text, f"{kind} needs {', '.join(missing)} (e.g. {kind}:"
                          f"{','.join(f'{k}=..' for k in REQUIRED_KEYS[kind])})")  # fmt: skip
    values = {**OPTIONAL_KEYS[kind], **given}

    def size(key: str) -> int:
        return _length(values[key], text, field)

    count, top = size("n"), size("max")
    if not 1 <= count <= MAX_SEQUENCES:
        raise ConfigError(field, text, f"n={count}; expected 1 to {MAX_SEQUENCES:,} sequences")
    seed = _seed(values["seed"], text, field)
    rng = np.random.default_rng(seed)
    low = size("min")
    if low > top:
        raise ConfigError(field, text, f"min={low} is above max={top}")
    if kind == "uniform":
        drawn = rng.integers(low, top, size=count, endpoint=True)
        return _checked([int(x) for x in drawn], text, field)
    mean = size("mean")
    if not low <= mean <= top:
        raise ConfigError(field, text, f"mean={mean} is outside min={low} to max={top}")
    sigma = _sigma(values["sigma"], text, field) if values["sigma"] else _spread(count, mean, top)
    # mu such that the unclipped lognormal's mean is ``mean``; the clip to [min, max] follows.
    mu = math.log(max(mean, 1)) - sigma * sigma / 2
    drawn = np.clip(np.rint(rng.lognormal(mu, sigma, size=count)), low, top)
    return _checked([int(x) for x in drawn], text, field)


def _spread(count: int, mean: int, top: int) -> float:
    """The sigma that puts ``top`` at the 1 - 1/(n+1) quantile of a lognormal of mean ``mean``
    (so the longest of n draws lands near max); the widest such where none does."""
    z = NormalDist().inv_cdf(1 - 1 / (count + 1))
    room = z * z - 2 * math.log(max(top, 1) / max(mean, 1))
    return max(z - math.sqrt(room), 1e-6) if room >= 0 else max(z, 1e-6)


def _seed(value: str, text: str, field: str) -> int:
    if not value.isdigit():
        raise ConfigError(field, text, f"seed={value}; expected a whole number 0 or more")
    return int(value)


def _sigma(value: str, text: str, field: str) -> float:
    try:
        sigma = float(value)
    except ValueError:
        sigma = float("nan")
    if not 0 < sigma <= 4:
        raise ConfigError(field, text, f"sigma={value}; expected a number above 0, at most 4")
    return sigma


def read_lengths_file(path: str | Path, field: str = "lengths_file") -> tuple[int, ...]:
    """The lengths in a ``.csv`` (one length a row, or a header naming a column such as
    ``length``) or a ``.json`` file (a list, or ``{"lengths": [...]}``)."""
    where = str(path)
    readers: dict[str, Callable[[str, str, str], list[int]]] = {
        ".csv": _csv_lengths,
        ".json": _json_lengths,
    }
    reader = readers.get(Path(where).suffix.lower())
    if reader is None:
        raise ConfigError(field, where, "expected a .csv or .json file of lengths")
    try:
        content = Path(where).read_text("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(field, where, "is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(field, where, f"cannot be read: {exc.strerror or exc}") from None
    lengths = reader(content, where, field)
    if not lengths:
        raise ConfigError(field, where, "holds no lengths")
    return _checked(lengths, where, field)


def _csv_lengths(content: str, where: str, field: str) -> list[int]:
    """Every cell of a file without a header; with one, the cells of its lengths column."""
    rows = [row for row in csv.reader(io.StringIO(content)) if any(c.strip() for c in row)]
    if not rows:
        return []
    first = [cell.strip().lower() for cell in rows[0]]
    if all(_is_number(cell) for cell in first if cell):
        return [
            _file_length(cell.strip(), f"line {line}", where, field)
            for line, row in enumerate(rows, start=1)
            for cell in row
            if cell.strip()
        ]
    named = [i for i, name in enumerate(first) if name in LENGTH_COLUMNS]
    if not named:
        raise ConfigError(field, where, f"line 1: no column named {'/'.join(LENGTH_COLUMNS)} "
                          "(a file without a header needs none)")  # fmt: skip
    column = named[0]
    return [
        _file_length(row[column].strip() if column < len(row) else "", f"line {line}", where, field)
        for line, row in enumerate(rows[1:], start=2)
    ]


def _json_lengths(content: str, where: str, field: str) -> list[int]:
    try:
        data = json.loads(content)
    except ValueError as exc:
        raise ConfigError(field, where, f"is not JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("lengths"), list):
        data = data["lengths"]
    if not isinstance(data, list):
        raise ConfigError(field, where, 'expected a JSON list of lengths or {"lengths": [...]}')
    lengths = []
    for index, item in enumerate(data):
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise ConfigError(field, where, f"item {index} is {item!r}, not a whole number")
        lengths.append(_file_length(str(item), f"item {index}", where, field))
    return lengths


def _is_number(cell: str) -> bool:
    try:
        parse_size(cell)
    except SizeError:
        return False
    return True


def _file_length(cell: str, at: str, where: str, field: str) -> int:
    try:
        value = parse_size(cell)
    except SizeError:
        raise ConfigError(field, where, f"{at}: {cell!r} is not a length") from None
    if not 0 <= value <= MAX_SEQ_LEN:
        raise ConfigError(field, where, f"{at}: a length of {value:,}; expected 0 to "
                          f"{MAX_SEQ_LEN:,}")  # fmt: skip
    return value
