"""``python -m workbench.gui [--db PATH]``: open the workbench."""

from __future__ import annotations

import argparse
import sys


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m workbench.gui", description="Open the FMHA workbench window."
    )
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=None,
        help="run database to open (default: the last one used, else the user data directory)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    # Imported here, not above: a spawned child (the engine's, a job's) re-imports this module
    # as __mp_main__ and must not load Qt.
    from workbench.gui.app import main

    sys.exit(main(_parse(sys.argv[1:]).db))
