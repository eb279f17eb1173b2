"""Write bench/results/INDEX.md: every committed results file, its size, what made it (the
command the citing docs name, the commits inside a workbench database, or the commit that added
it) and the README/docs pages that cite it.

Run from the repository root: `python scripts/results_index.py` (`--check` exits 1 when the
index is stale, `--orphans` lists the files nothing cites). Databases are opened read-only
(`mode=ro`) with sqlite3, never through the store, which migrates on open.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = "bench/results"
INDEX = ROOT / RESULTS / "INDEX.md"
# Files no page names but a page's figure rests on: the page they back, so the index says why
# they are kept (each target must exist; tests/test_results_index.py checks it).
EVIDENCE: dict[str, str] = {}
# A backticked or linked name that looks like a results file: what the docs cite.
RESULT_NAME = re.compile(r"[\w.-]+\.(?:db|json|jsonl|md|txt|csv|png|gz|cubin|ncu-rep)\b")
# A page's own words for what made a file win over any command on its line.
MADE_BY = re.compile(r"made by `([^`]+)`")
COMMAND = re.compile(
    r"`((?:scripts/|bench/)[\w./-]+\.(?:sh|py)[^`]*"
    r"|fmha-workbench (?:sweep|ladder|machine|bandwidth|profile) [^`]+"
    r"|STAGES=[^`]+|python3? [^`]+)`"
)


# Each file's first commit: renames off, so a moved file keeps the commit that made it.
GIT_LOG_ADDED = (
    "git",
    "log",
    "--reverse",
    "--no-renames",
    "--diff-filter=A",
    "--name-only",
    "--format=@%h",
)


@dataclass(frozen=True)
class Entry:
    path: str
    size: int
    made_by: str
    commit: str
    cited_by: tuple[str, ...]


def tracked_results() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--", RESULTS], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return sorted(p for p in out.splitlines() if p != f"{RESULTS}/INDEX.md")


def doc_pages() -> list[Path]:
    """README.md and every page under docs/ (the lab notebook included)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _expand_shorthand(text: str) -> str:
    """Spell out the pages' shorthand: `a-x.json`, `.md` names a-x.md, and `-y.json` after it
    names a-x-y.json or a-y.json (whichever the folder has; both are offered)."""

    def spelled(match: re.Match[str]) -> str:
        first = re.match(r"`([\w./-]+?)(\.[\w.]+)`", match.group(0))
        assert first is not None
        stem = first.group(1)
        base = stem.rsplit("-", 1)[0]
        names = []
        for tail in re.findall(r"`([.-][\w.-]+)`", match.group(0)[first.end() :]):
            names += [stem + tail] if tail.startswith(".") else [stem + tail, base + tail]
        return match.group(0) + " " + " ".join(f"`{n}`" for n in names)

    return re.sub(r"`[\w./-]+?\.\w+`(?:,? \(?`[.-][\w.-]+`\)?)+", spelled, text)


def doc_texts() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): _expand_shorthand(p.read_text(encoding="utf-8"))
        for p in doc_pages()
    }


def _tokens(text: str) -> set[str]:
    """Every name and path a page spells, without a sentence's closing stop."""
    words = {w.rstrip(".") for w in re.findall(r"[\w.-]+(?:/[\w.-]*)*", text)}
    parts = {part for w in words for part in w.split("/") if part}
    return words | parts | {w.rstrip("/") for w in words} | {p + "/" for p in parts}


def citing_pages(path: str, tokens: dict[str, set[str]]) -> tuple[str, ...]:
    """The pages that name ``path``: by its path, its name, or a folder it lies in."""
    rel = path.removeprefix(RESULTS + "/")
    names = {path, rel, Path(rel).name}
    for folder in Path(rel).parts[:-1]:
        if folder != "experiments":
            names |= {folder, folder + "/"}
    return tuple(sorted(page for page, words in tokens.items() if names & words))


def _stem(path: str) -> str:
    name = Path(path).name
    return str(Path(path).parent / name.split(".", 1)[0])


def _database_summary(path: Path) -> tuple[str, str]:
    """A workbench database's runs, groups and GPU, and the commits its runs were made at."""
    uri = f"file:{path}?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as db:
        tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
        if "runs" not in tables:
            return "a SQLite file, not a run database", ""
        rows = db.execute("select machine, group_id from runs").fetchall()
    commits: list[str] = []
    gpus: set[str] = set()
    for machine, _ in rows:
        record = json.loads(machine) if machine else {}
        commit = record.get("git_commit")
        if commit and commit not in commits:
            commits.append(commit)
        if record.get("gpu_name"):
            gpus.add(record["gpu_name"])
    groups = {g for _, g in rows if g is not None}
    gpu = ", ".join(sorted(gpus)) or "CPU"
    return f"workbench database: {len(rows)} runs in {len(groups)} groups on {gpu}", ", ".join(
        sorted(commits)
    )


def _added_commits() -> dict[str, str]:
    """Each results file's first commit (short hash), from one walk of the history."""
    out = subprocess.run(
        [*GIT_LOG_ADDED, "--", RESULTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    added: dict[str, str] = {}
    commit = ""
    for line in out.splitlines():
        if line.startswith("@"):
            commit = line[1:]
        elif line:
            added.setdefault(line, commit)
    return added


def _command_in_docs(path: str, texts: dict[str, str], pages: tuple[str, ...]) -> str:
    """The first command named on a doc line (or table row) that cites ``path``."""
    rel = path.removeprefix(RESULTS + "/")
    names = {Path(rel).name, rel, path}
    # docs/performance.md's table of bench/results says what made each file; then the rest.
    for page in sorted(pages, key=lambda page: page != "docs/performance.md"):
        for line in texts.get(page, "").splitlines():
            if names & _tokens(line):
                found = MADE_BY.search(line) or COMMAND.search(line)
                if found:
                    return found.group(1).strip()
    return ""


def _command_in_file(path: str) -> str:
    """The first command a text result names at its top (the explorer's reports start so)."""
    if not path.endswith((".md", ".txt")):
        return ""
    head = (ROOT / path).read_text(encoding="utf-8", errors="replace")[:2000]
    found = COMMAND.search(head)
    return found.group(1).strip() if found else ""


def entries() -> list[Entry]:
    texts = doc_texts()
    tokens = {page: _tokens(text) for page, text in texts.items()}
    added = _added_commits()
    paths = tracked_results()
    direct = {path: citing_pages(path, tokens) for path in paths}
    stems = {path: _stem(path) for path in paths}  # once each: asked for every pair of files
    result = []
    for path in paths:
        file = ROOT / path
        pages = direct[path]
        if not pages:
            # The raw data beside a cited report (a.json beside a.md) is cited with it.
            siblings = [p for p in paths if p != path and stems[p] == stems[path] and direct[p]]
            pages = tuple(f"with `{Path(p).name}`" for p in siblings)
        made_by, commit = "", ""
        if path.endswith(".db"):
            made_by, commit = _database_summary(file)
        command = _command_in_docs(path, texts, direct[path]) or _command_in_file(path)
        siblings = [p for p in paths if p != path and stems[p] == stems[path]]
        while not command and siblings:
            command = _command_in_file(siblings.pop(0))
        if command:
            made_by = f"{made_by}; `{command}`" if made_by else f"`{command}`"
        commit = commit or added.get(path, "")
        made_by = made_by or "the run its citing page describes"
        if path in EVIDENCE:
            pages = (*pages, f"kept as evidence for {EVIDENCE[path]}")
        result.append(Entry(path, file.stat().st_size, made_by, commit, pages))
    return result


def dangling_citations() -> list[str]:
    """Each results file a page names that is not in the tree, as `page: name`. A name after
    *git* COMMIT is history (`git show` prints it) and is not looked for."""
    have = set(tracked_results())
    found = []
    for path in doc_pages():
        page, text = str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
        text = re.sub(r"\*git\* \w+ `[^`]+`", "", text)
        for name in re.findall(r"`([^`\s]+)`", text):
            name = name.rstrip("/")
            if name.startswith(RESULTS + "/"):
                candidates = [name]
            elif re.fullmatch(r"(?:experiments/)?(?:h200|ncu|window|blackwell)[\w.-]*", name):
                candidates = [f"{RESULTS}/{name}", f"{RESULTS}/experiments/{name}"]
            else:
                continue
            if not RESULT_NAME.fullmatch(Path(name).name) and not name.startswith(RESULTS):
                continue
            if not any(c in have or any(h.startswith(c + "/") for h in have) for c in candidates):
                found.append(f"{page}: {name}")
    return sorted(set(found))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(items: list[Entry]) -> str:
    total = sum(e.size for e in items)
    lines = [
        "# bench/results/: what each file is for",
        "",
        "<!-- generated by `python scripts/results_index.py`; do not edit -->",
        "",
        f"{len(items)} files, {total:,} bytes. Each with what made it (the command the citing "
        "page names, or for a workbench database its runs and the commits they were measured "
        "at), the commit (the database's, else the one that added the file) and the pages that "
        "cite it. `tests/test_results_index.py` fails when a file here is cited nowhere, when "
        "a page cites a results file that does not exist, or when this index is stale.",
        "",
        "| file | bytes | made by | commit | cited by |",
        "|---|---|---|---|---|",
    ]
    for e in items:
        cited = ", ".join(e.cited_by) or "**nothing**"
        name = e.path.removeprefix(RESULTS + "/")
        lines.append(
            f"| `{name}` | {e.size:,} | {_cell(e.made_by)} | {e.commit} | {_cell(cited)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    items = entries()
    if argv[1:] == ["--dangling"]:
        print("\n".join(dangling_citations()))
        return 0
    if argv[1:] == ["--orphans"]:
        for e in items:
            if not e.cited_by:
                print(e.path)
        return 0
    text = render(items)
    if argv[1:] == ["--check"]:
        if not INDEX.exists() or INDEX.read_text(encoding="utf-8") != text:
            print(f"{INDEX.relative_to(ROOT)} is stale: run python scripts/results_index.py")
            return 1
        return 0
    if argv[1:]:
        print(
            "usage: python scripts/results_index.py [--check | --orphans | --dangling]",
            file=sys.stderr,
        )
        return 2
    INDEX.write_text(text, encoding="utf-8")
    print(f"wrote {INDEX.relative_to(ROOT)} ({len(items)} files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
