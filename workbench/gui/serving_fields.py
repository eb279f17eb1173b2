"""The form's ragged-batch row: the lengths as text (a list, or a seeded distribution as
``sweep --lengths`` takes it), the KV cache and its page size. Empty lengths: a uniform batch,
the form as it was. With lengths, "Seq lengths" is the batch's longest sequence at each point
(docs/serving.md) and the lengths-are row says decode (k_len, at its q_len) or varlen prefill (N).
"""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLineEdit, QVBoxLayout, QWidget

from workbench.batch import parse_lengths
from workbench.batch_lengths import CONTIGUOUS, PAGE_SIZES, PAGED
from workbench.config import Problem


class ServingFields(QWidget):
    """Lengths, KV cache and page size; emits ``changed`` on an edit."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lengths = QLineEdit()
        self.lengths.setObjectName("lengths")
        self.lengths.setPlaceholderText("uniform; or 300,30000,1k or lognormal:…")
        self.lengths.setToolTip(
            "One sequence per length (0 is an empty request), or a seeded distribution "
            "(lognormal:n=..,mean=..,max=.. / uniform:n=..,min=..,max=..). Decode on the "
            "k_len axis (q_len queries a sequence), else a varlen prefill."
        )
        self.kv_cache = QComboBox()
        self.kv_cache.setObjectName("kv_cache")
        for value in (PAGED, CONTIGUOUS):
            self.kv_cache.addItem(value, value)
        self.page_size = QComboBox()
        self.page_size.setObjectName("page_size")
        for size in PAGE_SIZES:
            self.page_size.addItem(f"P{size}", size)
        # The lengths above the cache and page size: one row of all three widened the form
        # past what a 1280-pixel screen leaves the History table.
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.lengths)
        row = QHBoxLayout()
        row.addWidget(self.kv_cache)
        row.addWidget(self.page_size)
        column.addLayout(row)
        self.lengths.textChanged.connect(self.changed)
        self.kv_cache.currentIndexChanged.connect(self.changed)
        self.page_size.currentIndexChanged.connect(self.changed)
        self.changed.connect(self._enable)
        self._enable()

    def _enable(self) -> None:
        """The cache and page size take effect only for a ragged batch (and the page size only
        for a paged cache): greyed out otherwise, so the form shows what a run will use."""
        ragged = bool(self.lengths.text().strip())
        self.kv_cache.setEnabled(ragged)
        self.page_size.setEnabled(ragged and self.kv_cache.currentData() == PAGED)

    def apply(self, problem: Problem, decode: bool) -> Problem:
        """``problem`` with the batch these fields state (unchanged where the lengths are
        empty); raises the core's ConfigError naming the field."""
        text = self.lengths.text()
        if not text.strip():
            return problem
        kv_cache = self.kv_cache.currentData() if decode else CONTIGUOUS
        page_size = self.page_size.currentData() if kv_cache == PAGED else None
        return dataclasses.replace(
            problem, batch=1, input_pos=0, lengths=parse_lengths(text), varlen=not decode,
            kv_cache=kv_cache, page_size=page_size,
        )  # fmt: skip
