"""Every refused combination of knobs is refused by the same rule, in the same words, at the
config boundary and at the CLI (one line, exit 2, nothing written); the window's side is
tests/gui/test_knob_rules_window.py. The cases come from the registry's rules
(tests/knob_cases.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernels import knobs
from tests.knob_cases import CASES, Case
from workbench.config import ConfigError, KernelConfig


def test_every_rule_has_a_case() -> None:
    assert len(CASES) == len(knobs.RULES) + sum(k.choices is not None for k in knobs.EXPOSED)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_config_boundary_refuses_it_naming_the_knob(case: Case) -> None:
    window = 64 if case.mask == "window" else None
    with pytest.raises(ConfigError) as refused:
        KernelConfig(mask=case.mask, window=window, **case.values)
    assert (refused.value.field, refused.value.value) == (case.field, case.value)
    assert refused.value.allowed == case.reason
    # Without the offending value the rest of the combination is fine.
    rest = {k: v for k, v in case.values.items() if k != case.field}
    KernelConfig(mask=case.mask, window=window, **rest)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_cli_refuses_it_in_one_line_and_writes_nothing(
    case: Case, run_cli: Callable[..., Any], db_path: Path
) -> None:
    base = ["sweep", "--seq-lens", "16", "--heads", "1", "--head-dim", "32"]
    result = run_cli(*base, *case.flags())
    assert result.code == 2, result.err
    # The rule's words, the knob named by the flag the user typed (issue 39).
    flag = knobs.KNOBS[case.field].flag
    expected = ConfigError(case.field, case.value, case.reason).cli_message(case.flags())
    # A switch is named as typed (--persistent, --no-remap), a number with its value.
    said = f"{flag} {knobs.KNOBS[case.field].text(case.value)}"
    if isinstance(case.value, bool):
        said = flag if case.value else f"--no-{flag[2:]}"
    assert expected.startswith(f"{said}: ") and "is not allowed" not in expected
    assert result.err_lines == [f"error: {expected}"] and result.out == ""
    assert not db_path.exists()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_kernel_refuses_what_it_would_not_run_in_the_same_words(case: Case) -> None:
    """The rules the kernel enforces raise its ValueError (LaunchConfig's check) with the same
    text; the others are the workbench's alone (the kernel would quietly ignore the knob)."""
    launch = {k: v for k, v in case.values.items() if k in knobs.LAUNCH}
    if case.launch:
        with pytest.raises(ValueError) as refused:
            knobs.check_launch(launch, case.mask)
        assert str(refused.value) == f"{case.field}={case.value!r}: {case.reason}"
    else:
        knobs.check_launch(launch, case.mask)
