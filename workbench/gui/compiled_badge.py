"""What the form's cuTile config compiles to, shown as the knobs change, never blocking.

A line under the form: registers, spill, shared memory per CTA and CTAs per SM of the config
compiled offline for an architecture (the GPU's when there is one, else sm_90; sm_100 and
sm_120 a click away), from :class:`workbench.analysis.resources.ResourceService`. Compiles take
seconds, so they run in a worker thread; a cached answer comes back in milliseconds. Only the newest
request is shown, and the worker skips requests that a newer one has replaced before it began.
A spilling config is marked in red before it runs; a compile error is text on the line.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Any

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from workbench.analysis.resources import (
    OFFLINE_ARCHS,
    CompiledResources,
    ResourceService,
    launch_knobs_of,
    read_child,
)

SPILL_STYLE = "color: #b00020; font-weight: bold;"
DEBOUNCE_MS = 150  # typing a number is one request, not one per digit


class _CompileWorker(QObject):
    """Lives in the badge's thread; answers requests in order, skipping stale ones. A cached
    answer is read here; a compile runs in a child process that :meth:`stop` can end."""

    answered = Signal(int, object)  # request number, CompiledResources or None

    def __init__(self, service: ResourceService) -> None:
        super().__init__()
        self.service = service
        self.newest = 0
        self.stopped = False
        self.lock = threading.Lock()
        self._child: subprocess.Popen[str] | None = None

    @Slot(int, object, object, str)
    def compile(self, number: int, problem: Any, config: Any, arch: str) -> None:
        with self.lock:
            if number != self.newest or self.stopped:
                return  # a newer request replaced this one while it waited
        launch = launch_knobs_of(config)
        assert launch is not None  # the badge never asks for an autotuned config
        try:
            found = self.service.cached(problem, config.mask, launch, arch)
            if found is None:
                with self.lock:
                    if self.stopped:
                        return
                    self._child = self.service.start_child(problem, config.mask, launch, arch)
                found = read_child(self._child, arch)
                with self.lock:
                    self._child = None
                if found is None:
                    return  # ended: the window is closing
        except Exception as exc:  # never into the window: the line says what went wrong
            found = CompiledResources(arch, error=f"{type(exc).__name__}: {exc}")
        self.answered.emit(number, found)

    @Slot()
    def warm(self) -> None:
        """Read the tool versions (imports cuda.tile: about a second) before the first ask, so
        a cached answer comes back at once."""
        self.service.versions()

    def stop(self) -> None:
        """From the GUI thread: end a compile in progress and take no more requests."""
        with self.lock:
            self.stopped = True
            if self._child is not None:
                self._child.kill()


class CompiledBadge(QWidget):
    """``Compiled for [sm_90 v]``, then ``168 regs · no spill · 161 KB smem · 1 CTA/SM``."""

    _request = Signal(int, object, object, str)
    _warm = Signal()
    answered = Signal(object)  # the CompiledResources shown (None: autotuned, nothing to show)

    def __init__(
        self, service: ResourceService | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.arch = QComboBox()
        self.arch.setObjectName("compiled_arch")
        self.arch.addItems(list(OFFLINE_ARCHS))
        self.arch.setToolTip("The GPU architecture the config is compiled for (offline, no GPU)")
        self.text = QLabel("")
        self.text.setObjectName("compiled_resources")
        self.text.setWordWrap(True)
        # The line wraps under its picker and asks for no width: the form sets the width.
        self.text.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row = QHBoxLayout()
        row.addWidget(QLabel("Compiled for"))
        row.addWidget(self.arch)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addLayout(row)
        layout.addWidget(self.text)
        self.shown: CompiledResources | None = None
        self._number = 0
        self._last: tuple[Any, Any] | None = None
        self._pending: tuple[int, Any, Any, str] | None = None
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self._send)
        self._thread = QThread(self)
        self._worker = _CompileWorker(service or ResourceService())
        self._worker.moveToThread(self._thread)
        self._request.connect(self._worker.compile)
        self._warm.connect(self._worker.warm)
        self._worker.answered.connect(self._on_answered)
        self._thread.start()
        self._warm.emit()
        self.arch.currentTextChanged.connect(self._on_arch)

    def set_arch(self, arch: str | None) -> None:
        """Follow the GPU the workbench runs on, when the offline compile knows it."""
        if arch in OFFLINE_ARCHS:
            self.arch.setCurrentText(arch)

    def show_config(self, problem: Any, config: Any, ours: bool = True) -> None:
        """Ask for ``config`` on ``problem`` (the form's, at its first length); None when
        the form does not validate. ``ours``: a ticked backend runs our kernel (else nothing
        of ours is compiled, and the line says so)."""
        self._last = (problem, config) if ours else None
        self._number += 1
        number = self._number
        with self._worker.lock:
            self._worker.newest = number
        if problem is None or config is None:
            self._show(None, "—")
            return
        if not ours:
            self._show(None, "— none of the ticked backends runs our kernel (a plugin's own "
                             "compile: resources --backend NAME)")  # fmt: skip
            return
        if config.tuned:
            self._show(None, "autotuned: the tuner picks the tiles per length; each point "
                             "stores what it compiled to")  # fmt: skip
            return
        self.text.setStyleSheet("")
        self.text.setText(f"compiling for {self.arch.currentText()}…")
        self._pending = (number, problem, config, self.arch.currentText())
        self._debounce.start()  # a burst of edits asks once, for where the form stopped

    def _send(self) -> None:
        if self._pending is not None and self._pending[0] == self._number:
            self._request.emit(*self._pending)
        self._pending = None

    def _on_arch(self, _arch: str) -> None:
        if self._last is not None:
            self.show_config(*self._last)

    @Slot(int, object)
    def _on_answered(self, number: int, found: Any) -> None:
        if number != self._number:
            return  # the form moved on
        text = "—" if found is None else found.summary().removeprefix(f"{found.arch}: ")
        if found is not None and found.key_block():
            text += "\n" + found.key_block()
        self._show(found, text)

    def _show(self, found: CompiledResources | None, text: str) -> None:
        self.shown = found
        # A spill or a compile error is the config's: marked. Missing tools are not.
        spills = found is not None and not found.unavailable and (found.spills or bool(found.error))
        self.text.setStyleSheet(SPILL_STYLE if spills else "")
        self.text.setText(text)
        self.text.setToolTip(
            "registers per thread · spill (stack + local bytes per thread) · shared memory "
            "per CTA · CTAs that fit one SM, read from the cubin cuobjdump shows; on sm_90, "
            "what one key block of the unmasked loop costs the SM in issue slots and MUFU "
            "(exp2) cycles, as shares of its tensor-core cycles, from the SASS: near 100 % "
            "the loop cannot keep the tensor cores busy"
        )
        self.answered.emit(found)

    def shutdown(self) -> None:
        self._worker.stop()
        self._thread.quit()
        self._thread.wait()
