"""Errors in the user's words (issue 52, item 4): the CLI names the flag the user typed with the
value as typed (``--window 64: …``, a switch alone, a list as its comma list), the Python API
the keyword (``window=64: …``), and the core gives the window the field's label to show."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kernels import knobs
from workbench.config import ConfigError, KernelConfig, Problem, parse_seq_lens
from workbench.field_words import FIELD_LABELS

RunCli = Callable[..., Any]
SWEEP = ["sweep", "--seq-lens", "64", "--heads", "1", "--head-dim", "32"]
INTERNAL = ("is not allowed", "True", "['", "kv_heads", "num_worker_warps", "seq_lens")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--window", "64"],
            "error: --window 64: a window size needs --mask window; give that mask or no size",
        ),
        (
            ["--backend", "nosuch"],
            "error: --backend nosuch: no backend 'nosuch'; expected one of reference, cutile, "
            "torch-flash, torch-cudnn, fa4, flashinfer, naive",
        ),
        (
            ["--backends", "reference,reference"],
            "error: --backends reference,reference: expected distinct backend names",
        ),
        (
            ["--persistent", "--mask", "window", "--window", "64"],
            "error: --persistent: the persistent grid is for --mask none or causal (got window): "
            "there is no window kernel for it; leave --persistent out",
        ),
        (["--no-k-split", "--poly-exp2-cols", "4"], None),
        (["--worker-warps", "3"], "error: --worker-warps 3: expected one of 4, 8"),
    ],
)
def test_the_cli_names_the_flag_and_the_value_as_typed(
    run_cli: RunCli, db_path: Any, args: list[str], line: str | None
) -> None:
    result = run_cli(*SWEEP, *args)
    assert result.code == 2 and result.out == "" and not db_path.exists()
    (said,) = result.err_lines
    if line is not None:
        assert said == line
    assert said.startswith(f"error: {args[0]}") or said.startswith(f"error: {args[-2]}"), said
    assert not any(word in said for word in INTERNAL), said


def test_the_length_flag_that_was_typed_is_the_one_named(run_cli: RunCli) -> None:
    decode = run_cli("sweep", "--q-len", "128", "--k-lens", "64", "--heads", "1")
    assert decode.err_lines[0].startswith("error: --k-lens 64: expected a key length")
    prefill = run_cli("sweep", "--seq-lens", "2M", "--heads", "1")
    assert prefill.err_lines == [
        "error: --seq-lens 2M: a length of 2,097,152; expected 1 to 1,048,576 (1M)"
    ]


def test_the_python_api_names_the_keyword_and_its_value(rng: np.random.Generator) -> None:
    heads = -int(rng.integers(0, 100))
    print(f"heads {heads}")
    with pytest.raises(ConfigError) as refused:
        Problem(heads=heads)
    assert str(refused.value) == f"heads={heads}: expected at least 1 and at most 1024"
    with pytest.raises(ConfigError) as refused:
        KernelConfig(window=64)
    assert str(refused.value).startswith("window=64: a window size needs mask 'window'")
    with pytest.raises(ValueError, match=r"^persistent=True: the persistent grid"):
        knobs.check_launch({"persistent": True}, "window")


def test_the_window_gets_the_field_label_and_the_value() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_seq_lens("abc")
    assert refused.value.label == "Seq lengths"
    assert refused.value.form_message() == (
        "Seq lengths 'abc': expected whole numbers (k = ×1024, M = ×1024²), e.g. 128,256 or 1k-16k"
    )
    with pytest.raises(ConfigError) as refused:
        KernelConfig(mask="window", window=64, persistent=True)
    assert refused.value.label == knobs.KNOBS["persistent"].label == "Persistent grid"
    assert refused.value.form_message().startswith(
        "Persistent grid on: the persistent grid is for Mask none or causal (got window)"
    )
    with pytest.raises(ConfigError) as refused:
        Problem(heads=6, kv_heads=4)
    assert refused.value.form_message() == (
        "KV heads 4: heads (6) must be divisible by KV heads for grouped-query attention"
    )


def test_every_exposed_knob_and_problem_field_has_a_flag_and_a_label() -> None:
    for knob in knobs.EXPOSED:
        refusal = ConfigError(knob.name, knob.default, "why")
        assert refusal.flag == knob.flag and refusal.label == knob.label
    for field in FIELD_LABELS:
        assert ConfigError(field, 1, "why").flag is not None
