"""A job says what it is; nothing switches on its name (issue #53 item 6).

(1) No module of the window (workbench/gui/) or the progress model (workbench/run/progress.py)
compares a job's kind: not its name as a string, not a ``.kind``/``.noun``, not a stored group's
kind constant, not an ``isinstance`` against one kind's job or started event. (2) A kind of job
defined only in the tests (tests/job_kind_probe.py) runs through the progress model and the
command line's printer with no edit to them; tests/gui/test_job_kinds_window.py runs it through
the window's job runner.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

import workbench.run.events as events
from tests.job_kind_probe import PROBE_FAILURE, ProbeJob, ProbeStarted, random_probe_spec
from workbench.jobs.base import Job
from workbench.measure.timing import TimingSettings
from workbench.run.progress import ProgressModel, ProgressPrinter
from workbench.store import Store

ROOT = Path(__file__).resolve().parents[1]
QUICK = TimingSettings(warmup=1, min_samples=3, min_time_s=0.0)


def subclasses(base: type) -> set[type]:
    found: set[type] = set()
    todo = [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("workbench") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def kind_vocabulary() -> tuple[set[str], set[str]]:
    """Every job kind the workbench knows, as words (its kind, its story's noun, the kind its
    group is stored as), and the names of the classes one kind owns (its job, its started
    event, its own refusal). A group of backends is stored as "backends", a word too common
    to scan for: a comparison with a group's kind is caught as a read of ``kind`` instead."""
    import workbench.jobs  # noqa: F401  (every kind's module, so its classes are subclasses)
    import workbench.jobs.ladder_steps as ladder
    from workbench.config import ConfigError

    # A refusal one kind's module raises (LadderStepError); base's are every job's.
    own_refusals = {
        cls
        for cls in subclasses(ConfigError)
        if cls.__module__.startswith("workbench.jobs.") and cls.__module__ != "workbench.jobs.base"
    }
    classes = subclasses(Job) | subclasses(events.JobStarted) | own_refusals
    words = {cls.kind for cls in classes if getattr(cls, "kind", "")}
    words |= {cls.story.noun for cls in subclasses(Job)}
    words.add(ladder.GROUP_KIND)
    return words, {cls.__name__ for cls in classes}


KIND_KEYS = {"kind", "noun"}  # what a job, its story or a stored group calls its kind
IDENTITY = (ast.Is, ast.IsNot)  # ``knob.kind is bool``: a knob's value type, not a job's kind


def kind_switches(source: str, words: set[str], classes: set[str]) -> list[str]:
    """Where ``source`` compares, matches or type-tests something against a job's kind."""
    tree = ast.parse(source)
    kind_names = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.endswith("KIND")
    }

    def is_kind_word(node: ast.AST) -> bool:
        """A kind's name: a string constant of one, or an imported *KIND constant."""
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(is_kind_word(part) for part in node.elts)
        if isinstance(node, ast.Constant):
            return node.value in words
        return getattr(node, "id", getattr(node, "attr", None)) in kind_names

    def reads_a_kind(node: ast.AST) -> bool:
        """``x.kind``, ``x.noun``, ``x["kind"]`` or ``x.get("kind")``."""
        if isinstance(node, ast.Attribute):
            return node.attr in KIND_KEYS
        if isinstance(node, ast.Subscript):
            return isinstance(node.slice, ast.Constant) and node.slice.value in KIND_KEYS
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            first = node.args[0] if node.args else None
            return (
                node.func.attr == "get"
                and isinstance(first, ast.Constant)
                and first.value in KIND_KEYS
            )
        return False

    def names_a_kind(node: ast.AST) -> bool:
        return is_kind_word(node) or reads_a_kind(node)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            by_value = not all(isinstance(op, IDENTITY) for op in node.ops)
            if any(is_kind_word(side) for side in sides) or (
                by_value and any(reads_a_kind(side) for side in sides)
            ):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match):
            values = [
                sub.value
                for case in node.cases
                for sub in ast.walk(case.pattern)
                if isinstance(sub, ast.MatchValue)
            ]
            if names_a_kind(node.subject) or any(names_a_kind(v) for v in values):
                found.append(f"line {node.lineno}: match {ast.unparse(node.subject)}")
        elif isinstance(node, ast.Subscript) and reads_a_kind(node.slice):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
        ):
            tested = node.args[1]
            parts = tested.elts if isinstance(tested, ast.Tuple) else [tested]
            named = {
                p.attr if isinstance(p, ast.Attribute) else getattr(p, "id", "") for p in parts
            }
            if named & classes:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def scanned_modules() -> list[Path]:
    return [*sorted((ROOT / "workbench" / "gui").rglob("*.py")), ROOT / "workbench/run/progress.py"]


def test_the_window_and_the_progress_model_never_switch_on_a_job_kind() -> None:
    words, classes = kind_vocabulary()
    assert {"sweep", "group", "ladder"} <= words, words  # the scan knows every kind
    assert {"SweepJob", "GroupStarted", "LadderStarted"} <= classes, classes
    modules = scanned_modules()
    assert len(modules) > 20, modules  # the whole window, not an empty glob
    switches = {
        str(path.relative_to(ROOT)): found
        for path in modules
        if (found := kind_switches(path.read_text(encoding="utf-8"), words, classes))
    }
    assert switches == {}, "ask the job's story instead: " + repr(switches)


@pytest.mark.parametrize(
    "snippet",
    [
        'if job.kind == "ladder": pass',
        'title = "Ladder" if model.story.noun == "ladder" else "Run"',
        'if "group" in (kind, other): pass',
        "from workbench.jobs.ladder_steps import GROUP_KIND as LK\nok = group['kind'] == LK",
        'ok = store.group(1).get("kind") != "backends"',
        'if group["kind"] in GROUP_KINDS: pass',
        "if model.story.noun == name: pass",
        'match event.kind:\n    case "sweep": pass',
        'match name:\n    case "ladder": pass',
        "text = TITLES[job.kind]",
        "if isinstance(event, ev.LadderStarted): pass",
        "if isinstance(event, (SweepStarted, GroupStarted)): pass",
        "if isinstance(exc, LadderStepError): pass",
    ],
)
def test_the_scan_catches_each_way_of_switching(snippet: str) -> None:
    words, classes = kind_vocabulary()
    assert kind_switches(snippet, words, classes), snippet


def test_the_scan_lets_a_story_be_asked() -> None:
    words, classes = kind_vocabulary()
    asked = (
        "if story.selects_its_runs: pass\n"
        "if isinstance(event, ev.JobStarted): note = story.started_note(model, event)\n"
        'if column == "pct": pass\n'
        "if knob.kind is bool: pass\n"
        'if "backends" not in state: pass\n'
    )
    assert kind_switches(asked, words, classes) == []


def feed(job: ProbeJob, db_path: Path) -> tuple[ProgressModel, list[str], list[str], list[str]]:
    """Run ``job`` through a progress model and the command line's printer, as both would."""
    model = ProgressModel.for_job(job)
    printed = io.StringIO()
    printer = ProgressPrinter(job.story, printed.write)
    notes, texts = [], []
    with Store(db_path) as store:
        for event in job.run(store, timing=QUICK):
            note = model.update(event)
            printer(event)
            if note:
                notes.append(note)
            texts.append(model.text)
    return model, notes, texts, printed.getvalue().splitlines()


def test_a_new_kind_of_job_runs_through_the_progress_model_and_printer(db_path: Path) -> None:
    spec, _ = random_probe_spec()
    model, notes, texts, lines = feed(ProbeJob(spec), db_path)
    first, second = model.run_ids
    points = 2 * len(spec.seq_lens)
    assert model.total == points and model.done == points
    assert notes == [
        "Probe: 2 runs",
        f"Probe run #{first} complete",
        f"Probe run #{second} complete",
    ]
    last = spec.seq_lens[-1]
    assert any(t.startswith(f"Probe 1/2 · Run #{first}: point 1/2") for t in texts), texts
    assert any(t.startswith(f"Probe 2/2 · Run #{second}: 2/2 done, N = {last:,}") for t in texts)
    outcome = model.outcome()
    assert outcome is not None and outcome.story is ProbeJob.story
    assert (outcome.status, outcome.line) == ("complete", f"Probe done: 2 runs, {points} points")
    assert lines[0] == f"probe of runs #{first}, #{second}"
    assert lines[-1] == outcome.line  # the printer announces its end, in the story's words
    with Store(db_path) as store:
        for run_id in model.run_ids:
            assert [p.seq_len for p in store.points(run_id)] == list(spec.seq_lens)


def test_a_new_kind_of_job_fails_in_its_own_words(db_path: Path) -> None:
    spec, _ = random_probe_spec()
    model, notes, _, lines = feed(ProbeJob(spec, fail_second=True), db_path)
    second = model.run_ids[1]
    assert notes[-1] == f"Probe run #{second} failed"
    outcome = model.outcome()
    assert outcome is not None
    assert (outcome.status, outcome.line) == ("failed", "Probe: 1 run(s) failed")
    assert outcome.failures == (f"probe run #{second}: {PROBE_FAILURE.splitlines()[0]}",)
    assert lines[-1] == outcome.line


def test_its_started_event_is_its_own() -> None:
    # The probe's started event is a kind the progress model has no name for.
    assert ProbeStarted.kind not in kind_vocabulary()[0]
