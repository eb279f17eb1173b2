"""The window's side of tests/test_knob_rules.py: each refused combination of the registry's
rules, set into the form, is either impossible to form (the row the rule says means nothing is
greyed out with the rule's reason, and runs its default) or greyed out as an entry with the
rule's reason, and where a stored setting forces it anyway, Run is refused naming that field
in the same words."""

from __future__ import annotations

from typing import Any

import pytest

from kernels import knobs
from tests.knob_cases import CASES, Case
from workbench.config import ConfigError
from workbench.gui.controls import ControlsPanel

pytestmark = pytest.mark.gui


@pytest.fixture
def form(qtbot: Any) -> ControlsPanel:
    panel = ControlsPanel()
    qtbot.addWidget(panel)
    panel.show()
    return panel


def _set(form: ControlsPanel, case: Case, values: dict[str, Any]) -> None:
    form.apply_state({"mask": case.mask, "window": 64, **values})


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_window_refuses_it_by_the_same_rule(form: ControlsPanel, case: Case) -> None:
    widget = form.field_widget(case.field)
    assert widget is not None
    if case.requires:
        _set(form, case, case.values)
        # The row means nothing here: greyed out, the reason first in its tooltip, and the
        # form runs (and shows) the knob's default.
        assert not widget.isEnabled() and widget.toolTip().startswith(case.reason)
        config = form.spec().config
        assert getattr(config, case.field) == knobs.KNOBS[case.field].default
        return
    others = {k: v for k, v in case.values.items() if k != case.field}
    _set(form, case, others)
    # The offending value is greyed out with the rule's reason.
    if knobs.KNOBS[case.field].kind is bool:
        assert not widget.isEnabled() and widget.toolTip().startswith(case.reason)
    else:
        item = widget.model().item(widget.findData(case.value))
        assert not item.isEnabled() and item.toolTip() == case.reason
        assert case.value not in form.offered(case.field)
    # Forced in anyway (as a stored setting can), Run's check refuses it naming the field.
    _set(form, case, case.values)
    with pytest.raises(ConfigError) as refused:
        form.spec()
    assert (refused.value.field, refused.value.allowed) == (case.field, case.reason)
    form.mark_error(refused.value.field, str(refused.value))
    assert form.invalid_fields() == [case.field]
