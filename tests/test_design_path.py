"""docs/design.md's "From form to launch" draws the path as the code has it: every file it
names exists, and every function (``name()``) and class it names is defined in the source."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"


def _section() -> str:
    text = DESIGN.read_text(encoding="utf-8")
    match = re.search(r"^## From form to launch\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert match, "docs/design.md has no 'From form to launch' section"
    return match.group(1)


def _sources() -> str:
    return "\n".join(
        path.read_text(encoding="utf-8")
        for folder in ("kernels", "workbench")
        for path in sorted((ROOT / folder).rglob("*.py"))
    )


def test_every_file_the_launch_path_names_exists() -> None:
    files = set(re.findall(r"(?<![\w/.])((?:kernels|workbench|tests)/[\w/]+\.py)", _section()))
    assert len(files) >= 10, f"the section names few files: {sorted(files)}"
    missing = sorted(f for f in files if not (ROOT / f).is_file())
    assert not missing, f"docs/design.md's launch path names files that do not exist: {missing}"


def test_every_function_and_class_the_launch_path_names_is_defined() -> None:
    section, sources = _section(), _sources()
    # ``forms.plan()`` names the module's function; ``LaunchConfig.of()`` a class's method.
    functions = {name.split(".")[-1] for name in re.findall(r"([\w.]+)\(\)", section)}
    classes = set(re.findall(r"\b((?:[A-Z][a-z]+){2,})\b", section))
    assert {"plan_launch", "kernel_calls", "decode_layout", "call_config"} <= functions
    assert {"LaunchPlan", "LaunchConfig", "PreparedLaunch", "KernelCall"} <= classes
    undefined = sorted(f"{n}()" for n in functions if not re.search(rf"\bdef {n}\(", sources))
    undefined += sorted(n for n in classes if not re.search(rf"^class {n}\b", sources, re.M))
    assert not undefined, f"docs/design.md's launch path names what the code lacks: {undefined}"


def test_only_plan_launch_resolves_an_auto_split_count() -> None:
    """The one place: decode_layout() calls the auto heuristic, and nothing else in kernels/ or
    the workbench does (the plan asks decode_layout(); the schedule and the tuner too)."""
    callers = sorted(
        path.relative_to(ROOT).as_posix()
        for folder in ("kernels", "workbench")
        for path in (ROOT / folder).rglob("*.py")
        if re.search(r"\bauto_kv_splits\(", path.read_text(encoding="utf-8"))
        and not re.search(r"^def auto_kv_splits\(", path.read_text(encoding="utf-8"), re.M)
    )
    assert callers == [], f"auto_kv_splits() called outside kernels/decode_layout.py: {callers}"
