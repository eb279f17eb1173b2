"""Bad input to the serving kernels is refused before anything launches: one line that names the
argument. The checks read shapes and host copies of the index arrays, so they run here with
NumPy stand-ins for the tensors, on a machine without a GPU (and without cuda.tile imported)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kernels.cutile.paged import check_paged, plan_paged
from kernels.cutile.varlen import check_tile, check_varlen


def f16(*shape: int) -> np.ndarray:
    return np.empty(shape, dtype=np.float16)


def i32(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def varlen_inputs(**change):
    args = dict(
        q=f16(10, 8, 64), k=f16(12, 2, 64), v=f16(12, 2, 64),
        cu_seqlens_q=i32(0, 3, 10), cu_seqlens_k=i32(0, 5, 12),
    )  # fmt: skip
    return args | change


def test_good_varlen_input_passes() -> None:
    s = check_varlen(**varlen_inputs())
    assert (s.total_q, s.total_k, s.heads, s.kv_heads, s.group) == (10, 12, 8, 2, 4)
    assert s.cu_q == (0, 3, 10) and s.cu_k == (0, 5, 12)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            dict(cu_seqlens_q=i32(0, 7, 3, 10), cu_seqlens_k=i32(0, 5, 6, 12)),
            r"^cu_seqlens_q must be non-decreasing: cu_seqlens_q\[2\] = 3 < cu_seqlens_q\[1\] = 7$",
        ),
        (
            dict(cu_seqlens_k=i32(0, 13, 12)),
            r"^cu_seqlens_k must be non-decreasing: cu_seqlens_k\[2\] = 12 < cu_seqlens_k\[1\]",
        ),
        (dict(cu_seqlens_q=i32(1, 3, 10)), r"^cu_seqlens_q must start at 0, got cu_seqlens_q\[0\]"),
        (
            dict(cu_seqlens_q=i32(0, 3, 9)),
            r"^cu_seqlens_q ends at 9 but q has 10 tokens \(cu_seqlens_q\[-1\] must match\)$",
        ),
        (
            dict(cu_seqlens_k=i32(0, 12)),
            r"^cu_seqlens_q has 3 offsets but cu_seqlens_k has 2 \(both batch \+ 1\)$",
        ),
        (
            dict(cu_seqlens_q=np.array([0, 3, 10], dtype=np.int64)),
            r"^cu_seqlens_q must be int32, got int64$",
        ),
        (dict(v=f16(11, 2, 64)), r"^v has 11 tokens but k has 12 \(both are total_k\)$"),
        (dict(v=f16(12, 4, 64)), r"^v has 4 heads but k has 2$"),
        (dict(k=f16(12, 3, 64), v=f16(12, 3, 64)), r"^q has 8 heads, not a multiple of k's 3"),
        (dict(k=f16(12, 2, 32), v=f16(12, 2, 32)), r"^k's head dim 32 differs from q's 64$"),
        (dict(q=f16(10, 8, 60), k=f16(12, 2, 60), v=f16(12, 2, 60)), r"^q's head dim 60 is not"),
        (dict(q=f16(1, 10, 8, 64)), r"^q must be \(total_q, heads, head_dim\), got shape"),
        (dict(k=np.empty((12, 2, 64), np.float32)), r"^k must be float16 or bfloat16, got float32"),
    ],
)
def test_bad_varlen_input_is_refused_naming_the_argument(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        check_varlen(**varlen_inputs(**change))
    assert "\n" not in str(err.value)


def paged_inputs(**change):
    table = np.array([[3, 0, 1], [2, 4, 4]], dtype=np.int32)  # page 4 shared, slot unused
    args = dict(
        q=f16(2, 1, 8, 64), k_cache=f16(5, 16, 2, 64), v_cache=f16(5, 16, 2, 64),
        block_table=table, seq_lens_k=i32(40, 17),
    )  # fmt: skip
    return args | change


def test_good_paged_input_passes() -> None:
    s = check_paged(**paged_inputs())
    assert (s.batch, s.q_len, s.group, s.page_size, s.num_pages) == (2, 1, 4, 16, 5)
    # An unused block-table slot may hold anything (here -1): only used pages are read.
    table = np.array([[3, 0, 1], [2, 4, -1]], dtype=np.int32)
    assert check_paged(**paged_inputs(block_table=table)).seq_lens == (40, 17)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            dict(block_table=np.array([[3, 0, 1], [2, 5, 0]], dtype=np.int32)),
            r"^block_table\[1, 1\] = 5 is out of range: k_cache has 5 pages$",
        ),
        (
            dict(block_table=np.array([[3, -2, 1], [2, 4, 0]], dtype=np.int32)),
            r"^block_table\[0, 1\] = -2 is out of range",
        ),
        (
            dict(k_cache=f16(5, 48, 2, 64), v_cache=f16(5, 48, 2, 64)),
            r"^k_cache's page size 48 \(shape\[1\]\) is not one the kernel takes: 16, 32, 64",
        ),
        (
            dict(k_cache=f16(5, 8, 2, 64), v_cache=f16(5, 8, 2, 64)),
            r"^k_cache's page size 8 ",
        ),
        (dict(v_cache=f16(5, 32, 2, 64)), r"^v_cache is \(5, 32, 2\) pages × page size × heads"),
        (dict(seq_lens_k=i32(40, 17, 3)), r"^seq_lens_k has 3 lengths but q has batch 2$"),
        (dict(seq_lens_k=i32(40, -1)), r"^seq_lens_k\[1\] = -1 is negative$"),
        (
            dict(seq_lens_k=i32(49, 17)),
            r"^seq_lens_k\[0\] = 49 needs 4 pages of 16 but block_table has 3 columns$",
        ),
        (
            dict(block_table=np.zeros((3, 3), np.int32)),
            r"^block_table has 3 rows but q has batch 2$",
        ),
        (
            dict(block_table=np.zeros((2, 3), np.int64)),
            r"^block_table must be int32, got int64$",
        ),
        (dict(q=f16(2, 1, 5, 64)), r"^q has 5 heads, not a multiple of k_cache's 2 heads$"),
        (dict(q=f16(2, 1, 8, 128)), r"^k_cache's head dim 64 differs from q's 128$"),
        (dict(q=f16(2, 8, 64)), r"^q must be \(batch, q_len, heads, head_dim\), got shape"),
        (dict(q=f16(2, 0, 8, 64)), r"^q's q_len \(shape\[1\]\) must be 1 to 1024, got 0$"),
    ],
)
def test_bad_paged_input_is_refused_naming_the_argument(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        check_paged(**paged_inputs(**change))
    assert "\n" not in str(err.value)


def test_the_paged_plan_refuses_what_it_has_no_kernel_for() -> None:
    with pytest.raises(ValueError, match=r"^block_n must be one of \(16, 32, 64, 128\), got 48$"):
        plan_paged([100], q_len=1, heads=8, kv_heads=2, page_size=16, block_n=48)
    with pytest.raises(ValueError, match=r"^page_size must be one of \(16, 32, 64, 128, 256\)"):
        plan_paged([100], q_len=1, heads=8, kv_heads=2, page_size=24)
    with pytest.raises(ValueError, match=r"^heads=8 is not a multiple of kv_heads=3$"):
        plan_paged([100], q_len=1, heads=8, kv_heads=3, page_size=16)


def test_a_varlen_tile_the_kernel_has_no_spill_free_build_for_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^block_m must be one of \(64, 128\), got 32$"):
        check_tile(32, 64)
    check_tile(128, 64)  # 128 rows run with 8 worker warps, spill-free
    with pytest.raises(ValueError, match=r"^block_n must be one of \(64, 128\), got 32$"):
        check_tile(64, 32)


def test_a_bad_window_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^window must be at least 1 key, got 0$"):
        check_varlen(**varlen_inputs(), window=0)


def test_the_checks_import_no_cuda_tile() -> None:
    # A CPU-only machine (no cuda.tile at all) refuses bad input the same way: the wrappers
    # import cuda.tile only to launch.
    code = (
        "import sys; import kernels.cutile.varlen, kernels.cutile.paged; "
        "print(any(m.startswith('cuda.tile') or m == 'torch' for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", done.stderr
