"""The one validated description of what to run: a problem shape and a kernel configuration.

Both are frozen dataclasses checked once, in ``__post_init__``, so every layer behind the boundary
(runner, backends, store, GUI) can trust them. Every error is a :class:`ConfigError` that names the
field, the bad value and what is allowed; the CLI prints it as one line and the GUI marks the field.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from kernels import knobs
from kernels.schedule import MASK_MODES
from workbench.batch_lengths import batch_violation, lengths_summary, scaled_to, tokens_read
from workbench.config_error import ConfigError as ConfigError
from workbench.config_error import check_choice as _check_choice
from workbench.config_error import check_int as _check_int
from workbench.config_fields import ConfigFields
from workbench.sizes import SizeError, parse_size

DTYPES = knobs.DTYPE.values
DTYPE_ITEMSIZE = knobs.DTYPE_ITEMSIZE
HEAD_DIMS = knobs.HEAD_DIM.values
MAX_SEQ_LEN = 1 << 20
# What a sweep's x axis is: "seq_len" (N = q_len, k_len = N + input_pos: prefill) or "k_len" (the
# keys at a fixed q_len, the queries last: decode). Runs stored before axes were recorded swept N.
SEQ_LEN_AXIS = "seq_len"
K_LEN_AXIS = "k_len"
AXES = (SEQ_LEN_AXIS, K_LEN_AXIS)
AXIS_LABELS = {SEQ_LEN_AXIS: "N", K_LEN_AXIS: "k_len"}
# A run's or group's label, at the CLI and in the window alike.
MAX_LABEL_CHARS = 200
# cuTile indexes with int32 unless told otherwise, and the reference should not be asked for more.
MAX_ELEMENTS = (1 << 31) - 1


MASK_FIELDS = ("mask", "window")
NOT_APPLICABLE = "—"
# How each backend takes the config's knobs, as its declaration says (the backends' catalog
# registers every declaration it loads: workbench.backends.catalog). KERNEL_KNOBS: all of
# them; TUNED_KNOBS: all, with a tuner that picks the tunable ones per length where the config
# is tuned (each point records its launch, the config's values are only nominal); MASK_ONLY:
# the mask alone, because it tiles on its own (a peer; a plugin, whose own knobs its run
# stores). A name no declaration registered (a plugin not loaded here) is MASK_ONLY.
KERNEL_KNOBS, TUNED_KNOBS, MASK_ONLY = "kernel", "tuned", "mask"
_knob_uses: dict[str, str] = {}


def register_knob_use(backend: str, use: str) -> None:
    """Say how ``backend`` takes the config's knobs (its declaration's word, from the catalog)."""
    _knob_uses[backend] = use


def knob_use(backend: str) -> str:
    return _knob_uses.get(backend, MASK_ONLY)


def own_knob_words(values: Mapping[str, Any]) -> str:
    """A plugin's own knob values as its run stored them: ``softcap 30.0, chunk_rows 128``."""
    return ", ".join(f"{name} {value}" for name, value in values.items())


@dataclass(frozen=True)
class Problem:
    """One attention problem: q and k (B, H or kv_heads, q_len or k_len, D), v (B, kv_heads,
    k_len, Dv) and the output (B, H, q_len, Dv); Dv = head_dim_v, the same as D unless set
    (DeepSeek's MLA prefill has D 192 and Dv 128). A ragged batch: see docs/serving.md."""

    batch: int = 1
    heads: int = 8
    kv_heads: int | None = None  # None means the same as heads (no GQA)
    q_len: int = 1024
    k_len: int = 1024
    head_dim: int = 64
    dtype: str = "float16"
    input_pos: int = 0  # causal offset; k_len - q_len is chunked prefill
    head_dim_v: int | None = None  # None means the same as head_dim
    lengths: tuple[int, ...] | None = None  # a ragged batch's keys per sequence; None: uniform
    varlen: bool = False  # with lengths: each sequence's queries are its tokens (prefill)
    kv_cache: str = "contiguous"  # or "paged" (a ragged batch's cache, pages of page_size)
    page_size: int | None = None
    shared_pages: int = 0  # the first pages of every sequence, one shared prefix (paged)

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        self._check_batch()
        _check_int("batch", self.batch, 1, 4096)
        _check_int("heads", self.heads, 1, 1024)
        _check_int("kv_heads", self.kv_heads, 1, 1024)
        if self.heads % cast(int, self.kv_heads):  # set just above when None
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
        if self.head_dim_v is not None:
            _check_choice("head_dim_v", self.head_dim_v, HEAD_DIMS)
            if self.head_dim_v == self.head_dim:  # one spelling of Dv = D, so equal problems are ==
                object.__setattr__(self, "head_dim_v", None)
        _check_choice("dtype", self.dtype, DTYPES)
        # Each tensor is indexed on its own: q and o by the query heads, k and v by the KV
        # heads (a GQA decode's 128k keys at batch 8 fit; counting them at the query heads did not).
        kv_heads = self.kv_heads if self.kv_heads is not None else self.heads
        width = max(self.head_dim, self.value_dim)
        largest = self.batch * width * max(self.heads * self.q_len, kv_heads * self.k_len)
        if self.lengths is not None:  # a ragged batch's tensors hold its real tokens
            largest = width * max(self.heads * sum(self.q_lens), kv_heads * self.kv_tokens())
        if largest > MAX_ELEMENTS:
            raise ConfigError(
                "batch" if self.lengths is None else "lengths",
                self.batch if self.lengths is None else list(self.lengths),
                f"the largest tensor (B·H·q_len·D or B·kv_heads·k_len·D) is {largest:,} elements, "
                "over 2^31 - 1 (int32 indexing); use fewer heads, a smaller batch or shorter "
                "sequences",
            )

    def _check_batch(self) -> None:
        """A ragged batch's lengths, cache and pages (:func:`batch_violation`); its batch,
        k_len, q_len and offset set from its lengths."""
        values = (self.lengths, self.varlen, self.kv_cache, self.page_size, self.shared_pages)
        refused = batch_violation(*values, q_len=self.q_len, max_len=MAX_SEQ_LEN)
        if refused is not None:
            raise ConfigError(*refused)
        if self.lengths is not None:
            lengths = tuple(self.lengths)
            object.__setattr__(self, "lengths", lengths)
            object.__setattr__(self, "batch", len(lengths))
            object.__setattr__(self, "k_len", max(lengths))
            if self.varlen:
                object.__setattr__(self, "q_len", self.k_len)
            object.__setattr__(self, "input_pos", 0 if self.varlen else self.k_len - self.q_len)

    @property
    def ragged(self) -> bool:
        """Is this a batch of sequences of their own lengths (varlen prefill or decode)?"""
        return self.lengths is not None

    @property
    def q_lens(self) -> tuple[int, ...]:
        """Queries per sequence: its own tokens in a varlen prefill, else q_len each."""
        if self.lengths is not None and self.varlen:
            return self.lengths
        return (self.q_len,) * self.batch

    @property
    def k_lens(self) -> tuple[int, ...]:
        """Keys per sequence: the ragged batch's lengths, else k_len each."""
        return self.lengths if self.lengths is not None else (self.k_len,) * self.batch

    def kv_tokens(self) -> int:
        """Key positions of K (and of V) the batch reads (:func:`tokens_read`: whole pages)."""
        return tokens_read(self.k_lens, self.page_size)

    def with_longest(self, longest: int) -> Problem:
        """The ragged batch scaled so its longest sequence has ``longest`` tokens."""
        assert self.lengths is not None
        return dataclasses.replace(self, lengths=scaled_to(self.lengths, longest))

    @property
    def value_dim(self) -> int:
        """Dv: the width of V and of the output (head_dim unless head_dim_v sets another)."""
        return self.head_dim if self.head_dim_v is None else self.head_dim_v

    @property
    def split_head_dims(self) -> bool:
        """Do V and the output have a head dim of their own (Dv != D)?"""
        return self.value_dim != self.head_dim

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
        return self.qo_bytes() + self.kv_bytes()

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

    def summary(self, axis: str = SEQ_LEN_AXIS) -> str:
        """``B4 H32/8 D128 float16 pos+64``: the shape in one line, for lists and headers; a
        sweep along k_len says its fixed q_len instead (``B1 H32/8 D128 bfloat16 q_len 1``); a
        ragged batch leads with its lengths (``ragged 64× 1k–32k (mean 4.1k) P16 H32/8 …``)."""
        heads = f"H{self.heads}" + (f"/{self.kv_heads}" if self.kv_heads != self.heads else "")
        if axis == K_LEN_AXIS:
            offset = f" q_len {self.q_len}"
        else:
            offset = f" pos+{self.input_pos}" if self.input_pos else ""
        dims = f"D{self.head_dim}" + (f"/{self.value_dim}" if self.split_head_dims else "")
        if self.lengths is not None:
            batch = lengths_summary(self.lengths, self.page_size, self.varlen)
            queries = "" if self.varlen else f" q_len {self.q_len}"
            return f"{batch} {heads} {dims} {self.dtype}{queries}"
        return f"B{self.batch} {heads} {dims} {self.dtype}{offset}"

    def with_seq_len(self, seq_len: int) -> Problem:
        """The same shape at sequence length ``seq_len``: q_len = N, k_len = N + input_pos (a
        ragged batch scaled so its longest sequence is N)."""
        if self.lengths is not None:
            return self.with_longest(seq_len)
        return dataclasses.replace(self, q_len=seq_len, k_len=seq_len + self.input_pos)

    def with_k_len(self, k_len: int) -> Problem:
        """The same queries against ``k_len`` keys, the queries last (decode: a KV cache of
        k_len - q_len tokens before them, so causal is bottom-right, input_pos = k_len - q_len);
        a ragged batch scaled so its longest sequence has k_len keys."""
        if self.lengths is not None and k_len >= self.q_len:
            return self.with_longest(k_len)
        if k_len < self.q_len:
            raise ConfigError(
                "k_lens",
                k_len,
                f"expected a key length of at least the {self.q_len} query rows (the queries are "
                "the last tokens)",
            )
        return dataclasses.replace(self, k_len=k_len, input_pos=k_len - self.q_len)

    def at(self, axis: str, value: int) -> Problem:
        """The point of a sweep along ``axis`` (:data:`AXES`) at ``value``."""
        return self.with_k_len(value) if axis == K_LEN_AXIS else self.with_seq_len(value)

    def kv_bytes(self) -> int:
        """Bytes of K (D wide) and V (Dv wide), each read once: what a memory-bound decode must
        move."""
        assert self.kv_heads is not None
        width = self.head_dim + self.value_dim
        if self.lengths is not None:  # the real lengths, a paged cache in whole pages
            return self.kv_tokens() * self.kv_heads * width * self.itemsize
        return self.batch * self.kv_heads * self.k_len * width * self.itemsize

    def qo_bytes(self) -> int:
        """Bytes of Q (D wide) read and O (Dv wide) written, once each."""
        width = self.head_dim + self.value_dim
        return sum(self.q_lens) * self.heads * width * self.itemsize

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Problem:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def refuse_first(violations: Iterable[knobs.Violation]) -> None:
    """The registry's first violation, as the ConfigError every boundary raises."""
    for problem in violations:
        raise ConfigError(problem.field, problem.value, problem.reason)


@dataclass(frozen=True)
class KernelConfig(ConfigFields):
    """The knobs of the optimization stack (one field per :data:`kernels.knobs.KNOBS` entry,
    written out in :mod:`workbench.config_fields` from the registry) and the mask. Backends
    ignore knobs they do not have."""

    def __post_init__(self) -> None:
        values = self.knob_values()
        refuse_first(knobs.value_violations(values))
        _check_choice("mask", self.mask, MASK_MODES)
        if self.mask == "window":
            if self.window is None:
                raise ConfigError("window", None, "mask 'window' needs a window size >= 1")
            _check_int("window", self.window, 1, MAX_SEQ_LEN)
        elif self.window is not None:
            raise ConfigError(
                "window",
                self.window,
                "a window size needs mask 'window'; give that mask or no size",
            )
        refuse_first(knobs.rule_violations(values, self.mask))

    def knob_values(self) -> dict[str, Any]:
        """The registry's knobs and their values (no mask, no window)."""
        return {name: getattr(self, name) for name in knobs.KNOBS}

    @property
    def causal(self) -> bool:
        return self.mask in ("causal", "window")

    def mask_summary(self) -> str:
        """``none``, ``causal`` or ``window 256``."""
        return f"window {self.window}" if self.mask == "window" else self.mask

    def summary_for(self, backend: str, own_knobs: Mapping[str, Any] | None = None) -> str:
        """:meth:`summary` where the backend has these knobs; the mask alone where it has not
        (a torch-cudnn run never used 64×64 tiles or a tuner), with ``own_knobs``, a plugin's
        knob values, where given; without the tuned knobs where its tuner chose them per length
        (an autotuned cuTile run did not run the form's 64×64)."""
        if own_knobs:
            return f"{self.mask_summary()} · {own_knob_words(own_knobs)}"
        if knob_use(backend) == MASK_ONLY:
            return f"{self.mask_summary()} · kernel knobs {NOT_APPLICABLE}"
        if self.tuned_by(backend):
            kept = [name for name in knobs.KNOBS if name not in knobs.TUNABLE]
            return " ".join([self.mask_summary(), *knobs.words(self.knob_values(), kept)])
        return self.summary()

    @property
    def tuned(self) -> bool:
        """Whether a tuner is to set the tunable knobs (:func:`kernels.knobs.tuned`): the
        values given for them are then only nominal."""
        return knobs.tuned(self.knob_values())

    def tuned_by(self, backend: str) -> bool:
        """Whether ``backend``'s tuner set the tunable knobs of this config's runs."""
        return self.tuned and knob_use(backend) == TUNED_KNOBS

    def fields_for(self, backend: str) -> dict[str, Any]:
        """:meth:`to_dict`, with None for each knob the backend does not have, or had chosen by
        its tuner (an empty cell in the CSV); the mask and window always apply."""
        data = self.to_dict()
        if knob_use(backend) == MASK_ONLY:
            data = {k: (v if k in MASK_FIELDS else None) for k, v in data.items()}
        elif self.tuned_by(backend):
            data = {k: (None if k in knobs.TUNABLE else v) for k, v in data.items()}
        return data

    def summary(self) -> str:
        """Short human description in the registry's words, e.g. ``128×64 causal fast-math
        k-split occ 2``: the tiles, the mask, then each knob that is on or set."""
        tiles, *rest = knobs.words(self.knob_values())
        return " ".join([tiles, self.mask_summary(), *rest])

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


def check_label(label: str) -> None:
    """A label is at most MAX_LABEL_CHARS characters (a run's, a group's, a relabel)."""
    if len(label) > MAX_LABEL_CHARS:
        raise ConfigError(
            "label", label[:20] + "…", f"expected at most {MAX_LABEL_CHARS} characters"
        )


def parse_seq_lens(text: str, field: str = "seq_lens") -> tuple[int, ...]:
    """``"128,256,512"`` or a power-of-two range ``"1k-16k"`` / ``"1024..16384"``.

    Each length is a size (:mod:`workbench.sizes`: k = ×1024, M = ×1024²). The result is
    sorted and without repeats.
    """
    # "12 8" is not 128: a space may stand beside a separator, never inside a number.
    if re.search(r"[0-9km]\s+[0-9km]", text.lower()):
        raise ConfigError(field, text, "expected whole numbers separated by commas")
    cleaned = re.sub(r"\s+", "", text.lower())
    if not cleaned:
        raise ConfigError(field, text, "expected a list like 128,256,512 or a range 1k-16k")

    def number(token: str) -> int:
        try:
            value = parse_size(token)  # ASCII digits only: not ١٢٨ or １２８
        except SizeError:
            raise ConfigError(
                field,
                text,
                "expected whole numbers (k = ×1024, M = ×1024²), e.g. 128,256 or 1k-16k",
            ) from None
        if not 1 <= value <= MAX_SEQ_LEN:  # the value as typed leads the refusal, not 2097152
            raise ConfigError(
                field, text, f"a length of {value:,}; expected 1 to {MAX_SEQ_LEN:,} (1M)"
            )
        return value

    range_match = re.fullmatch(r"([0-9km]+)(?:-|\.\.)([0-9km]+)", cleaned)
    if range_match:
        lo, hi = number(range_match.group(1)), number(range_match.group(2))
        if lo > hi or lo & (lo - 1) or hi & (hi - 1):
            raise ConfigError(
                field, text, "a range needs two powers of two, low to high, e.g. 1k-16k"
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
    # The x axis (:data:`AXES`): seq_lens are N (q_len = N) or, with "k_len", the key lengths
    # at the problem's fixed q_len.
    axis: str = SEQ_LEN_AXIS

    def __post_init__(self) -> None:
        _check_choice("axis", self.axis, AXES)
        name = "k_lens" if self.axis == K_LEN_AXIS else "seq_lens"
        if not self.seq_lens:
            raise ConfigError(name, self.seq_lens, "expected at least one length")
        for n in self.seq_lens:
            _check_int(name, n, 1, MAX_SEQ_LEN)
        # Validate every point's shape now, so a sweep never fails half-way on a bad length.
        for n in self.seq_lens:
            self.problem.at(self.axis, n)
        check_label(self.label)
        if self.seed is not None:
            # NumPy's SeedSequence takes any whole number >= 0; check now, not mid-sweep.
            _check_int("seed", self.seed, 0)

    def problems(self) -> list[Problem]:
        return [self.problem.at(self.axis, n) for n in self.seq_lens]

    def x_of(self, problem: Problem) -> int:
        """Where a point of this sweep sits on its axis: its k_len or its N (= q_len)."""
        return problem.k_len if self.axis == K_LEN_AXIS else problem.q_len
