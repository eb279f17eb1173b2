"""``resources --backend NAME`` for a plugin that declares ``compile_cubin=``: what its kernel
compiles to offline (no GPU) at the problem of the flags and its ``--plugin-knob`` values,
printed as for our kernel."""

from __future__ import annotations

import argparse

from kernels import knobs
from workbench.cli.database import db_of
from workbench.cli.exit_codes import EXIT_FAILED, EXIT_OK
from workbench.cli.output import emit_json
from workbench.cli.resources_args import resource_archs, resources_problem
from workbench.cli.values import UsageError
from workbench.config import KernelConfig


def plugin_resources(args: argparse.Namespace) -> int:
    """The ``resources`` command for ``args.backend``, a plugin's backend."""
    from workbench.analysis.resources import missing_tools
    from workbench.backends.catalog import declarations
    from workbench.backends.plugin_backend import PluginBackend
    from workbench.backends.plugin_compile import cached_plugin_resources, compiles_offline

    name = args.backend
    found = declarations().get(name)
    if found is None:
        known = ", ".join(
            n for n, d in declarations().items() if d.kernel_resources or compiles_offline(d)
        )
        raise UsageError(f"--backend {name}: no such backend here (load its file with --plugin); "
                         f"expected one of {known}")  # fmt: skip
    if not compiles_offline(found):
        raise UsageError(
            f"--backend {name}: no compiled resources: only cutile and plugins that declare "
            "compile_cubin= compile offline"
        )
    if args.runs:
        raise UsageError("--runs: each stored run names its own backend and plugin file; "
                         f"leave out --backend {name}")  # fmt: skip
    if db_of(args) is not None:
        raise UsageError("--db: only with --runs (a config alone is compiled, not stored)")
    for knob in knobs.EXPOSED:  # our kernel's knobs mean nothing to a plugin's kernel
        typed = getattr(args, knob.name)
        if typed != knob.default:
            raise UsageError(
                f"{knob.flag} {typed}: a knob of our cuTile kernel; {name} takes its own "
                "(--plugin-knob NAME=VALUE)"
            )
    problem = resources_problem(args)
    config = KernelConfig(mask=args.mask, window=args.window)
    backend = found.make()
    assert isinstance(backend, PluginBackend)
    backend.check_declared(problem, config)  # its dtypes, masks, head dims and knob rules
    archs = resource_archs(args.arch)
    why = missing_tools()
    if why:
        raise UsageError(f"cannot compile here: {why}")
    found_on = {
        arch: cached_plugin_resources(backend.plugin, problem, config, backend.knob_values, arch)
        for arch in archs
    }
    if args.json:
        emit_json({arch: res.to_dict() for arch, res in found_on.items()})
    else:
        settings = " ".join(f"{k}={v}" for k, v in backend.knob_values.items())
        lengths = (
            f"N={problem.q_len}"
            if args.q_len is None
            else f"q_len={problem.q_len} k_len={problem.k_len}"
        )
        print(f"{name} {settings} · mask={config.mask} · {problem.summary()} {lengths}")
        for res in found_on.values():
            print(res.summary())
    return EXIT_FAILED if any(res.error for res in found_on.values()) else EXIT_OK
