"""The int32 limit is each tensor's own: a GQA decode's keys count at the KV heads, so the
README's ``--preset llama3-8b-decode --batch 8`` (128k keys) is a problem the workbench takes."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.config import MAX_ELEMENTS, ConfigError, Problem


def test_gqa_keys_count_at_the_kv_heads(rng: np.random.Generator) -> None:
    batch = int(rng.choice([4, 8]))
    print(f"batch {batch}")
    decode = Problem(batch=batch, heads=32, kv_heads=8, q_len=1, k_len=131072, head_dim=128)
    assert decode.batch * decode.kv_heads * decode.k_len * decode.head_dim <= MAX_ELEMENTS
    # The same keys at 32 KV heads are 2^32 elements at batch 8 (2^31 at 4): refused.
    with pytest.raises(ConfigError) as refused:
        Problem(batch=batch, heads=32, kv_heads=32, q_len=1, k_len=131072, head_dim=128)
    assert refused.value.field == "batch" and "B·kv_heads·k_len·D" in str(refused.value)


def test_many_query_rows_still_count_at_the_query_heads() -> None:
    with pytest.raises(ConfigError, match=r"2\^31 - 1"):
        Problem(batch=64, heads=64, kv_heads=1, q_len=8192, k_len=8192, head_dim=128)
