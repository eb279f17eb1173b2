"""The desktop workbench (Qt): it renders what the core stores and sends it commands.

Start it with ``fmha-workbench`` (no arguments) or ``python -m workbench.gui``; the entry point is
:func:`workbench.gui.app.main`. Nothing here measures or decides: the runner, the store and the
backends do, and the core never imports this package.

Importing the package imports no Qt. The PySide6 refcount guard (:mod:`workbench.gui._pyside_fix`)
is applied by the entry points, before the first widget.
"""
