"""How the project times GPU launches: interleaved rounds in a balanced order, and the one
sampling procedure (graph replay or events) behind the tuner, the benchmark and the workbench.

No cuda.tile import: the workbench core and bench/ use this module too; CuPy or torch are
imported only when a launch is timed.

A GPU inherits the clock that the previous kernel's load left it at, for a good part of a
tenth of a second, so a config timed right after a power-hungry one reads slow. Rotating a fixed
list does not fix that: every config still follows the same neighbour in nearly every round.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any


def _williams_rows(n: int) -> list[list[int]]:
    """The rows of a Williams design: base 0, 1, n-1, 2, n-2, ... shifted by 0..n-1, and for
    odd ``n`` each shifted row reversed too."""
    base = [0]
    step = 1
    while len(base) < n:
        base.append(step)
        if len(base) < n:
            base.append(n - step)
        step += 1
    rows = [[(x + shift) % n for x in base] for shift in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 else rows


# Nodes the search for an evenly filled cycle may visit per target before it settles for less.
_SEARCH_NODES = 1500
_SEARCH_MAX_ITEMS = 10


class _OutOfBudget(Exception):
    pass


def _even_cycle(rows: list[list[int]], uses: int, target: int) -> list[list[int]] | None:
    """A cycle that uses every row ``uses`` times and every boundary pair once, in which no
    prefix lets any item follow one neighbour more than ``target`` times more often than
    another; depth-first, most even continuation first; None if none is found in budget."""
    n = len(rows[0])
    internal = [list(itertools.pairwise(row)) for row in rows]
    counts = {(x, y): 0 for x in range(n) for y in range(n) if x != y}
    left = [uses] * len(rows)
    used: set[tuple[int, int]] = set()
    chosen: list[int] = []
    visited = 0

    def unevenness() -> int:
        return max(
            max(col) - min(col)
            for col in ([counts[(x, y)] for x in range(n) if x != y] for y in range(n))
        )

    def step(i: int, prev: int | None, sign: int) -> None:
        for pair in internal[i]:
            counts[pair] += sign
        if prev is not None:
            counts[(prev, rows[i][0])] += sign

    def extend() -> bool:
        nonlocal visited
        visited += 1
        if visited > _SEARCH_NODES:
            raise _OutOfBudget
        if len(chosen) == len(rows) * uses:
            wrap = (rows[chosen[-1]][-1], rows[chosen[0]][0])
            return wrap[0] != wrap[1] and wrap not in used
        prev = rows[chosen[-1]][-1] if chosen else None
        options = []
        for i in [0] if prev is None else range(len(rows)):
            start = rows[i][0]
            if left[i] and (prev is None or (start != prev and (prev, start) not in used)):
                step(i, prev, 1)
                score = unevenness()
                step(i, prev, -1)
                if score <= target:
                    options.append((score, i))
        for _, i in sorted(options):
            left[i] -= 1
            chosen.append(i)
            step(i, prev, 1)
            if prev is not None:
                used.add((prev, rows[i][0]))
            if extend():
                return True
            if prev is not None:
                used.discard((prev, rows[i][0]))
            step(i, prev, -1)
            chosen.pop()
            left[i] += 1
        return False

    try:
        return [rows[i] for i in chosen] if extend() else None
    except _OutOfBudget:
        return None


def _euler_cycle(rows: list[list[int]], uses: int) -> list[list[int]]:
    """The same cycle found by Hierholzer's algorithm: always exists, less even in prefixes.
    Nodes are (where a round starts, where it ends); each row is an edge from its first item
    to its last, and each boundary pair an edge from an end to a different start."""
    n = len(rows[0])
    out: dict[tuple[str, int], list[tuple[tuple[str, int], int | None]]] = {}
    for _ in range(uses):
        for index, row in enumerate(rows):
            out.setdefault(("start", row[0]), []).append((("end", row[-1]), index))
    for x in range(n):
        out[("end", x)] = [(("start", y), None) for y in range(n) if y != x]
    stack: list[tuple[tuple[str, int], int | None]] = [(("start", 0), None)]
    circuit: list[int | None] = []
    while stack:
        edges = out.get(stack[-1][0])
        if edges:
            stack.append(edges.pop())
        else:
            circuit.append(stack.pop()[1])
    return [rows[i] for i in reversed(circuit) if i is not None]


@functools.cache
def _round_cycle(n: int) -> tuple[tuple[int, ...], ...]:
    """Williams rows in an order in which the turn that ends one round and the turn that
    starts the next are balanced too.

    Rounds run back to back, so the first turn of a round follows the last of the one before.
    Shifting a Williams row by one each round puts the same two items at every such boundary
    pair's distance, so each item follows one neighbour twice as each of the others
    (docs/experiments.md). Here each row is used ``uses``
    times and each boundary pair once, so that over the cycle every item follows every other
    item equally often; the order is the most even one a short search finds in every
    prefix, so that runs shorter than a cycle are nearly balanced too."""
    if n <= 2:
        return (tuple(range(n)),)  # 0, 1, 0, 1, ...: each follows the other every time
    rows = _williams_rows(n)
    uses = n - 1 if n % 2 == 0 else (n - 1) // 2  # every node's in- and out-degree match
    cycle = None
    if n <= _SEARCH_MAX_ITEMS:
        for target in (1, 2, 3):
            cycle = _even_cycle(rows, uses, target)
            if cycle:
                break
    return tuple(tuple(row) for row in cycle or _euler_cycle(rows, uses))


def balanced_order(n: int, round_index: int) -> list[int]:
    """The order of ``n`` items in timing round ``round_index``: a permutation per round, from
    a cycle of ``n·(n-1)`` rounds (one for ``n`` ≤ 2) over which every item runs right after
    every other item equally often, counting the turn that ends a round and the one that
    starts the next, and first in a round equally often (``n`` ≥ 3)."""
    if n <= 0:
        return []
    cycle = _round_cycle(n)
    return list(cycle[round_index % len(cycle)])


# --------------------------------------------------------------------------------------------
# The one timing procedure: CUDA-graph replay turns, or CUDA-event turns where a launch cannot
# be captured. The tuner's second stage, the benchmark and every GPU backend of the workbench
# time through :class:`LaunchSampler`; nothing else in the project times a GPU launch.
# --------------------------------------------------------------------------------------------

# One turn of graph replay, as triton's do_bench_cudagraph: a graph of about this many ms of
# back-to-back launches, replayed this many times with a synchronisation after each.
GRAPH_TARGET_MS = 15.0
GRAPH_REPLAYS = 10
# One turn of event timing: this many launches queued back to back, an event pair around each.
EVENT_BATCH = 10
MAX_GRAPH_CALLS = 1000


def side_stream(lib: str) -> Any:
    """A new non-blocking stream of ``lib`` ("torch" or "cupy")."""
    if lib == "torch":
        import torch

        return torch.cuda.Stream()
    import cupy

    return cupy.cuda.Stream(non_blocking=True)


def synchronize(lib: str) -> None:
    """Wait for all work on the current device."""
    if lib == "torch":
        import torch

        torch.cuda.synchronize()
    else:
        import cupy

        cupy.cuda.Device().synchronize()


class DeviceClock:
    """CUDA events and CUDA graphs on one torch or CuPy stream.

    Launches made inside :meth:`on_stream` go to that stream when they use the library's
    current stream (torch ops, cuTile with ``stream=None``, CuPy kernels)."""

    def __init__(self, lib: str, stream: Any = None) -> None:
        if lib not in ("torch", "cupy"):
            raise ValueError(f"lib must be 'torch' or 'cupy', got {lib!r}")
        self.lib = lib
        self.stream = stream if stream is not None else side_stream(lib)

    def event(self) -> Any:
        if self.lib == "torch":
            import torch

            return torch.cuda.Event(enable_timing=True)
        import cupy

        return cupy.cuda.Event()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        if self.lib == "torch":
            return float(start.elapsed_time(end))
        import cupy

        return float(cupy.cuda.get_elapsed_time(start, end))

    def on_stream(self) -> Any:
        """A context in which the library's current stream is ``self.stream``."""
        if self.lib == "torch":
            import torch

            return torch.cuda.stream(self.stream)
        return self.stream  # a CuPy stream is its own context manager

    def each_ms(self, launch: Callable[[], object], n: int) -> list[float]:
        """Milliseconds of each of ``n`` calls of ``launch`` queued back to back (an event
        between calls, one synchronisation at the end)."""
        events = [self.event() for _ in range(n + 1)]
        with self.on_stream():
            events[0].record(self.stream)
            for event in events[1:]:
                launch()
                event.record(self.stream)
        events[-1].synchronize()
        return [self.elapsed_ms(a, b) for a, b in itertools.pairwise(events)]

    def paired_ms(
        self, launch: Callable[[], object], n: int, between: Callable[[], object] | None
    ) -> list[float]:
        """``n`` calls, each between its own event pair, ``between`` (an L2 flush) untimed
        before each; one untimed lead call first so the first timed one finds the queue busy."""
        pairs = [(self.event(), self.event()) for _ in range(n)]
        with self.on_stream():
            launch()
            for start, end in pairs:
                if between is not None:
                    between()
                start.record(self.stream)
                launch()
                end.record(self.stream)
        pairs[-1][1].synchronize()
        return [self.elapsed_ms(start, end) for start, end in pairs]

    def capture(self, run: Callable[[], object], count: int) -> Callable[[], None]:
        """``count`` calls of ``run`` captured once in a CUDA graph; returns its replay on the
        current stream (:meth:`on_stream` makes that ``self.stream``)."""
        if self.lib == "torch":
            import torch

            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):  # its own side stream is current while capturing
                for _ in range(count):
                    run()
            return graph.replay
        import cupy

        side = cupy.cuda.Stream(non_blocking=True)
        with side:
            side.begin_capture()
            try:
                for _ in range(count):
                    run()
            finally:
                cgraph = side.end_capture()
        cgraph.upload(self.stream)
        # A replay on this stream is not ordered after an upload made on another one.
        self.stream.synchronize()
        return lambda: cgraph.launch(cupy.cuda.get_current_stream())


class LaunchSampler:
    """A launch made ready for timing, in turns of samples (milliseconds per call).

    ``method="graph"``: each turn is one run of triton's ``do_bench_cudagraph`` procedure: one
    call, five timed back to back to size a graph of about ``target_ms`` of calls, the graph
    captured afresh, then ``replays`` replays with a synchronisation after each; a sample is
    one replay's time over its call count. ``method="events"``: each turn is ``EVENT_BATCH``
    calls queued back to back with an event pair around each. A launch that cannot be
    captured (its first capture raises) falls back to events; :attr:`method` says which ran.
    ``between`` runs untimed before every sample (an L2 flush).
    """

    def __init__(
        self,
        run: Callable[[], object],
        lib: str,
        *,
        graph: bool = True,
        target_ms: float = GRAPH_TARGET_MS,
        replays: int = GRAPH_REPLAYS,
        between: Callable[[], object] | None = None,
        stream: Any = None,
    ) -> None:
        self.run = run
        self.clock = DeviceClock(lib, stream)
        self.method = "graph" if graph else "events"
        self.target_ms = target_ms
        self.replays = replays
        self.between = between
        self.fallback_reason: str | None = None
        # The side stream does not wait for the caller's: the inputs must be complete first.
        synchronize(lib)

    def turn(self) -> list[float]:
        if self.method == "graph":
            try:
                return self._graph_turn()
            except Exception as exc:  # not capturable: time plain launches from here on
                self.method = "events"
                self.fallback_reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
                synchronize(self.clock.lib)
        return self.clock.paired_ms(self.run, EVENT_BATCH, self.between)

    def _graph_turn(self) -> list[float]:
        clock = self.clock
        clock.each_ms(self.run, 1)
        per_call_ms = sum(clock.each_ms(self.run, 5)) / 5
        count = max(1, min(MAX_GRAPH_CALLS, int(self.target_ms / max(per_call_ms, 1e-3))))
        replay = clock.capture(self.run, count)
        samples = []
        for _ in range(self.replays):
            if self.between is not None:
                with clock.on_stream():
                    self.between()
            samples.append(clock.each_ms(replay, 1)[0] / count)
        return samples


def graph_median_ms(
    run: Callable[[], object], lib: str, target_ms: float, replays: int, stream: Any = None
) -> float:
    """Median milliseconds per call over one graph turn of :class:`LaunchSampler`."""
    import statistics

    sampler = LaunchSampler(run, lib, target_ms=target_ms, replays=replays, stream=stream)
    return statistics.median(sampler.turn())
