"""One parser for sizes: every flag that takes a length reads 32k, 1K and 1M the same way as
``--k-lens`` does, and refuses the same bad text with the same one-line error naming the flag."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from workbench.config import ConfigError, parse_seq_lens
from workbench.sizes import SIZE_EXPECTED, SizeError, parse_size


@pytest.mark.parametrize(
    ("text", "value"),
    [("32k", 32768), ("32K", 32768), ("1M", 1 << 20), ("1m", 1 << 20), (" 4096 ", 4096)],
)
def test_a_size_reads_k_as_1024_and_m_as_1024_squared(text: str, value: int) -> None:
    assert parse_size(text) == value
    assert parse_seq_lens(text) == (value,)


@pytest.mark.parametrize("text", ["1,024", "32q", "1.5k", "", "k", "３２"])
def test_text_that_is_no_size_is_refused_quoting_it(text: str) -> None:
    with pytest.raises(SizeError) as refused:
        parse_size(text)
    assert str(refused.value).startswith(SIZE_EXPECTED) and repr(text) in str(refused.value)


def test_a_comma_in_a_number_says_what_to_write() -> None:
    with pytest.raises(SizeError, match=r"a comma separates lists: write 1024\)$"):
        parse_size("1,024")


def test_lists_and_ranges_take_the_same_units(rng: np.random.Generator) -> None:
    kilo = int(rng.integers(1, 64))
    print(f"k = {kilo}")
    assert parse_seq_lens(f"{kilo}K,{kilo * 1024}") == (kilo * 1024,)
    assert parse_seq_lens("1K-4K") == (1024, 2048, 4096)
    assert parse_seq_lens("256k-1M") == (1 << 18, 1 << 19, 1 << 20)
    with pytest.raises(ConfigError) as refused:
        parse_seq_lens("2M")
    assert refused.value.field == "seq_lens"


def _blockmap(run_cli: Callable[..., Any], *flags: str) -> dict[str, Any]:
    result = run_cli("blockmap", *flags, "--tile-n", "128", "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_blockmap_reads_32k_as_the_same_key_length_as_32768(
    run_cli: Callable[..., Any], rng: np.random.Generator
) -> None:
    kilo = int(rng.integers(2, 33))
    print(f"k_len = {kilo}k")
    short = _blockmap(run_cli, "--q-len", "1", "--k-len", f"{kilo}k", "--input-pos", "1k")
    long = _blockmap(run_cli, "--q-len", "1", "--k-len", str(kilo * 1024), "--input-pos", "1024")
    assert short == long
    assert short["k_len"] == kilo * 1024


@pytest.mark.parametrize(
    "argv",
    [
        ["blockmap", "--q-len", "32q"],
        ["blockmap", "--q-len", "1", "--k-len", "32q"],
        ["blockmap", "--q-len", "1", "--input-pos", "32q"],
        ["resources", "--seq-len", "32q"],
        ["profile", "1", "--seq-len", "32q"],
        ["sweep", "--window", "32q"],
    ],
)
def test_every_length_flag_refuses_bad_text_in_one_line_naming_it(
    run_cli: Callable[..., Any], argv: list[str]
) -> None:
    result = run_cli(*argv)
    assert result.code == 2 and result.out == ""
    (line,) = result.err_lines
    flag = argv[-2]
    assert f"argument {flag}: {SIZE_EXPECTED}; got '32q'" in line, line
