"""What the window keeps about a running group sweep: plain data, no Qt.

The core decides what the group is (:class:`workbench.jobs.GroupJob`, planned where it runs);
the window only counts what arrives: the group and its runs (GroupStarted), points over all
its runs for the progress bar, and how each run ended for one message when the group ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GroupProgress:
    job: Any  # workbench.jobs.GroupJob
    total: int  # points over all the group's runs (the plan's, once GroupStarted says)
    group_id: int | None = None
    run_ids: tuple[int, ...] = ()
    done: int = 0  # points finished, over all runs
    ended: dict[int, tuple[str, str]] = field(default_factory=dict)  # run_id: (status, error)

    @classmethod
    def for_job(cls, job: Any) -> GroupProgress:
        return cls(job, len(job.spec.seq_lens) * len(job.backends))

    def points_in_order(self) -> tuple[int, ...]:
        """The lengths in the order the group measures them: every backend at each length."""
        return tuple(n for n in sorted(self.job.spec.seq_lens) for _ in self.job.backends)

    def started(self, group_id: int, run_ids: list[int], total: int) -> None:
        self.group_id, self.run_ids, self.total = group_id, tuple(run_ids), total

    def summary(self, cancelled: bool) -> tuple[str, list[str]]:
        """A status line, and one line per run that failed (empty when none did)."""
        failed = [
            f"run #{rid} failed: {error.splitlines()[0] if error else 'no error text'}"
            for rid, (status, error) in sorted(self.ended.items())
            if status == "failed"
        ]
        runs = len(self.run_ids)
        complete = sum(status == "complete" for status, _ in self.ended.values())
        head = f"Group #{self.group_id}"
        if failed:
            return f"{head}: {len(failed)} of {runs} runs failed", failed
        if complete < runs:
            how = "cancelled" if cancelled else "stopped"
            return f"{head} {how}: {self.done} of {self.total} points, kept as they are", []
        return f"{head} complete: {runs} runs, {self.done} points", []
