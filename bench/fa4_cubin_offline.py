"""FlashAttention-4's sm_90 forward (CuTe DSL) compiled to an sm_90a cubin without a GPU, for
`bench/sass_loop.py --cubin`.

    PYTHONPATH=/tmp/fa4site:/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages \
      python3.12 bench/fa4_cubin_offline.py 128 OUT_DIR   # or 64; one head dim a process

/tmp/fa4site is the FA4 bundle unpacked (``.fa4/activate-fa4.sh``); flash_attn.cute imports
torch at module level, so a Python 3.12 with torch installed (never used) runs it. fp16,
non-causal, the tile ``_tile_size_fwd_sm90`` picks (D 128: 128x128; D 64: 192x128).
"""

# It mirrors flash_attn/cute/interface.py::_flash_attn_fwd (arch 9x branch) but skips all
# torch.cuda queries: arch comes from CUTE_DSL_ARCH, tensors are CuTe fake tensors
# (only types/layouts matter at compile time; nothing is launched).
import glob
import math
import os
import shutil
import sys

D = int(sys.argv[1])
PROB = {128: dict(B=4, H=32, N=8192), 64: dict(B=4, H=32, N=4096)}[D]
OUT = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".")
DUMP = os.path.join(OUT, f"dump_d{D}")
shutil.rmtree(DUMP, ignore_errors=True)
os.makedirs(DUMP)
os.environ["CUTE_DSL_ARCH"] = "sm_90a"
os.environ["CUTE_DSL_KEEP"] = "cubin,ptx"
os.environ["CUTE_DSL_DUMP_DIR"] = DUMP

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
from flash_attn.cute.flash_fwd_sm90 import FlashAttentionForwardSm90  # noqa: E402
from flash_attn.cute.interface import _tile_size_fwd_sm90  # noqa: E402
from flash_attn.cute.utils import AuxData  # noqa: E402
from quack.compile_utils import make_fake_tensor as fake_tensor  # noqa: E402

cfg = _tile_size_fwd_sm90(D, D, False, False)
print("config:", cfg, PROB)


# Positional, in FlashAttentionForwardBase's order: dtype, head dims, heads per KV head,
# causal, local, GQA packing, then the tile's rows and keys.
fa_fwd = FlashAttentionForwardSm90(
    cutlass.Float16,
    D,
    D,
    1,
    False,
    False,
    False,
    cfg.m_block_size,
    cfg.n_block_size,
    num_stages=2,
    num_threads=384,
    Q_in_regs=False,
    intra_wg_overlap=cfg.intra_wg_overlap,
    mma_pv_is_rs=cfg.mma_pv_is_rs,
    mask_mod=None,
    score_mod=None,
    has_aux_tensors=False,
    q_subtile_factor=None,
    paged_kv_non_tma=False,
)
# Fake (tensor-free) GPU tensors, as in interface.py's make_fake_bwd_tensors: all dims
# symbolic (the real to_cute_tensor path also yields fully symbolic shapes), last dim
# stride 1, other strides symbolic with 16-byte divisibility (LSE: 4-byte).
# (CPU torch tensors + to_cute_tensor fail: "EnvStream cannot be detected ... need GPU Tensors".)
sym = cute.sym_int
b, s_q, s_k, h, d = sym(), sym(), sym(), sym(), sym()
div = 128 // cutlass.Float16.width
q_t = fake_tensor(cutlass.Float16, (b, s_q, h, d), divisibility=div)
k_t = fake_tensor(cutlass.Float16, (b, s_k, h, d), divisibility=div)
v_t = fake_tensor(cutlass.Float16, (b, s_k, h, d), divisibility=div)
o_t = fake_tensor(cutlass.Float16, (b, s_q, h, d), divisibility=div)
lse_t = fake_tensor(cutlass.Float32, (b, h, s_q), divisibility=1)
stream = cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=True)
compiled = cute.compile(
    fa_fwd,
    q_t,
    k_t,
    v_t,
    o_t,
    lse_t,
    1.0 / math.sqrt(D),
    None,
    None,
    None,
    None,  # cu_seqlens_q/k, seqused_q/k
    None,
    None,
    None,  # page_table, window_size_left/right
    None,  # learnable_sink
    None,
    AuxData(None, None),  # block sparse, aux
    None,
    None,  # cu_total_m_blocks, cu_total_splits_m_blocks
    stream,
    options="--enable-tvm-ffi",
)
cubins = sorted(glob.glob(f"{DUMP}/**/*.cubin", recursive=True), key=os.path.getsize)
print("cubins:", cubins)
dst = os.path.join(OUT, f"fa4-sm90-d{D}.cubin")
shutil.copy(cubins[-1], dst)
print("wrote", dst, os.path.getsize(dst))
