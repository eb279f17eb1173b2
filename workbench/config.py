"""The one validated description of what to run: a problem shape and a kernel configuration.

Both are frozen dataclasses checked once, in ``__post_init__``, so every layer behind the boundary
(runner, backends, store, GUI) can trust them. Every error is a :class:`ConfigError` that names the
field, the bad value and what is allowed; the CLI prints it as one line and the GUI marks the field.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The kernel's own knob values (cluster sizes, polynomial shares), checked here the same way.
from kernels.knobs import CLUSTER_CTAS, K_UNROLLS, poly_exp2_choices
from kernels.schedule import MASK_MODES

DTYPES = ("float16", "bfloat16")
DTYPE_ITEMSIZE = {"float16": 2, "bfloat16": 2}
TILE_SIZES = (16, 32, 64, 128, 256)
HEAD_DIMS = (32, 64, 128, 256)
# The worker-warp counts the cuTile kernel runs (kernels.cutile_fmha.WORKER_WARPS: tileiras 13.4
# takes 4 and 8, other powers of two need CTK 13.5); the other backends ignore the hint.
WORKER_WARPS = (4, 8)
MAX_SEQ_LEN = 1 << 20
# cuTile indexes with int32 unless told otherwise, and the reference should not be asked for more.
MAX_ELEMENTS = (1 << 31) - 1


# Peer backends run the problem and its mask with their own tiling: the project kernel's tile
# sizes, flags and hints mean nothing for them, so their runs show the mask alone.
MASK_ONLY_BACKENDS = frozenset({"torch-flash", "torch-cudnn", "fa4", "naive"})
MASK_FIELDS = ("mask", "window")
NOT_APPLICABLE = "—"


class ConfigError(ValueError):
    """A bad value at the boundary: ``field`` names it so a UI can mark it."""

    def __init__(self, field_name: str, value: Any, allowed: str) -> None:
        self.field = field_name
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field_name}: {value!r} is not allowed; {allowed}")

    def __reduce__(self) -> tuple[type, tuple[str, Any, str]]:
        # Picklable, so a refusal in the GPU engine's child process arrives as itself.
        return (type(self), (self.field, self.value, self.allowed))


def _check_int(name: str, value: Any, lo: int, hi: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, value, "expected a whole number")
    if value < lo or (hi is not None and value > hi):
        upper = f" and at most {hi}" if hi is not None else ""
        raise ConfigError(name, value, f"expected at least {lo}{upper}")


def _check_choice(name: str, value: Any, choices: Iterable[Any]) -> None:
    choices = tuple(choices)
    if value not in choices or (
        isinstance(value, bool) and not any(isinstance(c, bool) for c in choices)
    ):
        shown = ", ".join(str(c) for c in choices)
        raise ConfigError(name, value, f"expected one of {shown}")


@dataclass(frozen=True)
class Problem:
    """One attention problem: q (B, H, q_len, D), k and v (B, kv_heads, k_len, D)."""

    batch: int = 1
    heads: int = 8
    kv_heads: int | None = None  # None means the same as heads (no GQA)
    q_len: int = 1024
    k_len: int = 1024
    head_dim: int = 64
    dtype: str = "float16"
    input_pos: int = 0  # causal offset; k_len - q_len is chunked prefill

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        _check_int("batch", self.batch, 1, 4096)
        _check_int("heads", self.heads, 1, 1024)
        _check_int("kv_heads", self.kv_heads, 1, 1024)
        if self.heads % self.kv_heads:
            raise ConfigError(
                "kv_heads",
                self.kv_heads,
                f"heads ({self.heads}) must be divisible by kv_heads for grouped-query attention",
            )
        # input_pos before the lengths: k_len = N + input_pos, so a bad offset is named as such
        _check_int("input_pos", self.input_pos, 0, MAX_SEQ_LEN)
        _check_int("q_len", self.q_len, 1, MAX_SEQ_LEN)
        _check_int("k_len", self.k_len, 1, MAX_SEQ_LEN)
        _check_choice("head_dim", self.head_dim, HEAD_DIMS)
        _check_choice("dtype", self.dtype, DTYPES)
        largest = self.batch * self.heads * max(self.q_len, self.k_len) * self.head_dim
        if largest > MAX_ELEMENTS:
            raise ConfigError(
                "batch",
                self.batch,
                f"B·H·N·D = {largest:,} elements exceeds 2^31 - 1 (int32 indexing); "
                "use fewer heads, a smaller batch or shorter sequences",
            )

    @property
    def group_size(self) -> int:
        assert self.kv_heads is not None
        return self.heads // self.kv_heads

    @property
    def itemsize(self) -> int:
        return DTYPE_ITEMSIZE[self.dtype]

    def tensor_bytes(self) -> int:
        """q, k, v and the output in the problem's dtype."""
        assert self.kv_heads is not None
        q_and_o = 2 * self.batch * self.heads * self.q_len * self.head_dim
        kv = 2 * self.batch * self.kv_heads * self.k_len * self.head_dim
        return (q_and_o + kv) * self.itemsize

    def check_fits(self, capacity_bytes: int | None, *, what: str = "device memory") -> None:
        """Refuse a problem whose tensors cannot fit ``capacity_bytes`` (None: unknown, allow)."""
        if capacity_bytes is None:
            return
        need = self.tensor_bytes()
        if need > capacity_bytes:
            raise ConfigError(
                "q_len",
                self.q_len,
                f"the tensors need {need / 2**30:.1f} GiB but {what} has "
                f"{capacity_bytes / 2**30:.1f} GiB; use shorter sequences or fewer heads",
            )

    def with_seq_len(self, seq_len: int) -> Problem:
        """The same shape at sequence length ``seq_len``: q_len = N, k_len = N + input_pos."""
        return dataclasses.replace(self, q_len=seq_len, k_len=seq_len + self.input_pos)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Problem:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class KernelConfig:
    """The knobs of the optimization stack. Backends ignore knobs they do not have."""

    tile_m: int = 64
    tile_n: int = 64
    fast_math: bool = False
    k_split: bool = False
    remap: bool = False
    mask: str = "none"
    window: int | None = None
    autotune: bool = False
    occupancy: int | None = None
    num_worker_warps: int | None = None
    # exp2 of this many score columns per key block as an FMA polynomial instead of on the
    # MUFU unit (the cuTile kernel's unmasked loop; 0 = off)
    poly_exp2_cols: int = 0
    # CTAs per cluster (cuTile's num_ctas hint; None: the compiler's choice). At tile_m=128 with
    # occupancy 2, a 2-CTA cluster splits the rows 64/64 and TMA multicasts K/V to both CTAs.
    # Last, so exported CSV columns keep the order they had before the knob existed.
    num_ctas: int | None = None
    # The cuTile kernel's persistent grid (mask none or causal): one program per SM slot
    # looping over the tiles; causal problems that are not whole square tiles run one CTA per
    # tile (kernels.schedule.causal_grid_aligned). After num_ctas for the same reason.
    persistent: bool = False
    # Key blocks per iteration of the persistent grid's key loop (mask none only): 2 gives K
    # and V two shared-memory buffers each (the kernel falls back to 1 where the key blocks
    # do not pair up). Last, after persistent, for the same reason.
    k_unroll: int = 1

    def __post_init__(self) -> None:
        _check_choice("tile_m", self.tile_m, TILE_SIZES)
        _check_choice("tile_n", self.tile_n, TILE_SIZES)
        for name in ("fast_math", "k_split", "remap", "autotune", "persistent"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "expected true or false")
        _check_choice("mask", self.mask, MASK_MODES)
        if self.mask == "window":
            if self.window is None:
                raise ConfigError("window", None, "mask 'window' needs a window size >= 1")
            _check_int("window", self.window, 1, MAX_SEQ_LEN)
        elif self.window is not None:
            raise ConfigError("window", self.window, "a window size needs mask 'window'")
        if self.occupancy is not None:
            _check_int("occupancy", self.occupancy, 1, 32)
        if self.num_worker_warps is not None:
            _check_choice("num_worker_warps", self.num_worker_warps, WORKER_WARPS)
        if self.num_ctas is not None:
            _check_choice("num_ctas", self.num_ctas, CLUSTER_CTAS)
        if self.persistent and self.mask == "window":
            raise ConfigError(
                "persistent",
                True,
                "the persistent grid is for mask none or causal (got window): there is no "
                "window kernel for it; turn it off or pick another mask",
            )
        if self.persistent and (self.num_ctas or 1) > 1:
            raise ConfigError(
                "persistent",
                True,
                f"the persistent grid does not run as clusters (num_ctas {self.num_ctas}); "
                "turn one of them off",
            )
        _check_choice("k_unroll", self.k_unroll, K_UNROLLS)
        if self.k_unroll > 1 and not self.persistent:
            raise ConfigError(
                "k_unroll",
                self.k_unroll,
                "key blocks in pairs are for the persistent grid only; turn the persistent "
                "grid on or take 1 block an iteration",
            )
        if self.k_unroll > 1 and self.mask != "none":
            raise ConfigError(
                "k_unroll",
                self.k_unroll,
                f"key blocks in pairs are for mask none only (got {self.mask}): the causal "
                "persistent grid takes 1 block an iteration",
            )
        if self.poly_exp2_cols != 0 or isinstance(self.poly_exp2_cols, bool):
            _check_choice("poly_exp2_cols", self.poly_exp2_cols, poly_exp2_choices(self.tile_n))
            if not self.k_split:
                raise ConfigError(
                    "poly_exp2_cols",
                    self.poly_exp2_cols,
                    "needs the K-loop split: the polynomial replaces exp2 only in the "
                    "unmasked loop",
                )

    @property
    def causal(self) -> bool:
        return self.mask in ("causal", "window")

    def mask_summary(self) -> str:
        """``none``, ``causal`` or ``window 256``."""
        return f"window {self.window}" if self.mask == "window" else self.mask

    def summary_for(self, backend: str) -> str:
        """:meth:`summary` where the backend has these knobs; the mask alone where it has not
        (a torch-cudnn run never used 64×64 tiles or autotune)."""
        if backend in MASK_ONLY_BACKENDS:
            return f"{self.mask_summary()} · kernel knobs {NOT_APPLICABLE}"
        return self.summary()

    def fields_for(self, backend: str) -> dict[str, Any]:
        """:meth:`to_dict`, with None for each knob the backend does not have (an empty cell in
        the CSV); the mask and window always apply."""
        data = self.to_dict()
        if backend in MASK_ONLY_BACKENDS:
            data = {k: (v if k in MASK_FIELDS else None) for k, v in data.items()}
        return data

    def summary(self) -> str:
        """Short human description, e.g. ``128×64 causal ftz split remap``."""
        parts = [f"{self.tile_m}×{self.tile_n}", self.mask_summary()]
        flags = [
            ("fast-math", self.fast_math),
            ("k-split", self.k_split),
            ("remap", self.remap),
            ("autotune", self.autotune),
        ]
        parts += [name for name, on in flags if on]
        parts += hint_words(
            self.occupancy, self.num_worker_warps, self.num_ctas, self.poly_exp2_cols
        )
        if self.persistent:
            parts.append("persistent")
        if self.k_unroll > 1:
            parts.append(f"k-unroll {self.k_unroll}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def as_stored(cls, data: Mapping[str, Any]) -> KernelConfig:
        """A stored run's config as it was written, even where this version refuses a value
        (worker warps 16 once passed), so the history still shows and exports that run."""
        try:
            return cls.from_dict(data)
        except ConfigError:
            config = cls()
            for f in dataclasses.fields(cls):
                if f.name in data:
                    object.__setattr__(config, f.name, data[f.name])
            return config


def hint_words(
    occupancy: int | None,
    num_worker_warps: int | None,
    num_ctas: int | None,
    poly_exp2_cols: int | None,
    before_poly: Sequence[str] = (),
) -> list[str]:
    """The compiler hints and the polynomial exp2 as label words (``occ 2``, ``8 warps``,
    ``cluster 2``, ``poly 16``), each only when set; ``before_poly`` goes in before ``poly``.
    One wording for the form's config and for what an autotuned point launched."""
    words = []
    if occupancy is not None:
        words.append(f"occ {occupancy}")
    if num_worker_warps is not None:
        words.append(f"{num_worker_warps} warps")
    if num_ctas is not None:
        words.append(f"cluster {num_ctas}")
    words += before_poly
    if poly_exp2_cols:
        words.append(f"poly {poly_exp2_cols}")
    return words


def parse_seq_lens(text: str) -> tuple[int, ...]:
    """``"128,256,512"`` or a power-of-two range ``"1k-16k"`` / ``"1024..16384"``.

    Suffix k means ×1024. The result is sorted and without repeats.
    """
    cleaned = text.strip().lower().replace(" ", "")
    if not cleaned:
        raise ConfigError("seq_lens", text, "expected a list like 128,256,512 or a range 1k-16k")

    def number(token: str) -> int:
        match = re.fullmatch(r"(\d+)(k?)", token)
        if not match:
            raise ConfigError(
                "seq_lens", text, "expected whole numbers (k = ×1024), e.g. 128,256 or 1k-16k"
            )
        value = int(match.group(1)) * (1024 if match.group(2) else 1)
        _check_int("seq_lens", value, 1, MAX_SEQ_LEN)
        return value

    range_match = re.fullmatch(r"([0-9k]+)(?:-|\.\.)([0-9k]+)", cleaned)
    if range_match:
        lo, hi = number(range_match.group(1)), number(range_match.group(2))
        if lo > hi or lo & (lo - 1) or hi & (hi - 1):
            raise ConfigError(
                "seq_lens", text, "a range needs two powers of two, low to high, e.g. 1k-16k"
            )
        values = []
        n = lo
        while n <= hi:
            values.append(n)
            n *= 2
        return tuple(values)
    return tuple(sorted({number(tok) for tok in cleaned.split(",") if tok}))


@dataclass(frozen=True)
class SweepSpec:
    """A problem template × sequence lengths × one config × one backend."""

    problem: Problem
    seq_lens: tuple[int, ...]
    config: KernelConfig
    backend: str = "reference"
    label: str = ""
    seed: int | None = None  # None: fresh random inputs every point
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.seq_lens:
            raise ConfigError("seq_lens", self.seq_lens, "expected at least one sequence length")
        for n in self.seq_lens:
            _check_int("seq_lens", n, 1, MAX_SEQ_LEN)
        # Validate every point's shape now, so a sweep never fails half-way on a bad length.
        for n in self.seq_lens:
            self.problem.with_seq_len(n)
        if len(self.label) > 200:
            raise ConfigError("label", self.label[:20] + "…", "expected at most 200 characters")
        if self.seed is not None:
            # NumPy's SeedSequence takes any whole number >= 0; check now, not mid-sweep.
            _check_int("seed", self.seed, 0)

    def problems(self) -> list[Problem]:
        return [self.problem.with_seq_len(n) for n in self.seq_lens]
