"""Pure compute for fmha-workbench: tile schedule, NumPy reference, cuTile kernel.

Nothing here imports Qt, SQLite or the ``workbench`` package, so the kernels can run on a
GPU host that has neither.
"""
