"""The cuTile FlashAttention forward pass, one concern per module.

- ``device``, ``device_tile``, ``device_persistent``, ``device_decode``: the ``@ct.kernel`` code
  (needs cuda.tile).
- ``config``: ``LaunchConfig``, one typed field per launch knob (below plan, forms and launch).
- ``plan``: ``plan_launch``, the one function that turns a validated config and a problem into a
  ``LaunchPlan`` with every auto value resolved (no cuda.tile import).
- ``forms``: the kernel forms, each kernel's parameter declaration (its own signature) and each
  parameter's value, read from the plan (``kernel_calls``).
- ``launch``: input checks, ``prepare`` and ``attention`` (which keeps each call's checks and
  plan for the next one like it).
- ``launches``: a problem's launches planned once, the arrays a caller does not pass, and the
  binding of a caller's arrays (what ``launch``, the tuner and the block map run).
- ``selftest``: ``probe``, the environment check with one tiny real launch.
- ``blockmap``: the instrumented launch that records which blocks the kernel's loops visited.
- ``tuner``: the autotuner and its JSON cache.
- ``compile``: offline compilation for an architecture, no GPU needed.
- ``arrays``: the torch/CuPy shim (no cuda.tile import; the workbench uses it too).
- ``diagnostics``: errors, whether this machine can run the kernel (``assess``), the tileiras
  version (no cuda.tile import).

This package file imports nothing, so ``kernels.cutile.arrays``, ``kernels.cutile.diagnostics``
and ``kernels.cutile.plan`` load on a machine without cuda.tile. ``kernels.cutile_fmha``
re-exports the public names.
"""
