"""The one-launch streaming read that `bandwidth` times: it reads every word exactly once."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("words", [1, 511, 1_000_003, 4 * 132 * 512 * 4 + 7])
def test_the_streaming_read_reads_every_word_exactly_once(words: int) -> None:
    import cupy

    from workbench.measure.stream_read import StreamRead

    seed = int(np.random.SeedSequence().entropy % 2**32)
    print(f"seed {seed}")
    host = np.random.default_rng(seed).integers(0, 2**32, size=words * 4, dtype=np.uint32)
    reader = StreamRead(cupy.asarray(host))
    reader()
    # A word skipped, or read twice (its XOR cancels), changes the checksum.
    assert reader.checksum() == int(np.bitwise_xor.reduce(host))


def test_a_buffer_of_part_words_is_refused() -> None:
    import cupy

    from workbench.measure.stream_read import StreamRead

    with pytest.raises(ValueError, match="whole 16-byte words"):
        StreamRead(cupy.ones(6, dtype=cupy.float32))


def test_the_measured_read_is_one_launch_and_says_so() -> None:
    from workbench.analysis import bandwidth

    measured = bandwidth.measure_gpu_read_bandwidth("this GPU", 64_000_000)
    assert measured.bytes_read == 64_000_000
    assert "one-launch read" in measured.method and "copies taken in turn" in measured.method
    # Any GPU this runs on reads HBM faster than 100 GB/s and slower than 20 TB/s.
    assert 100 < measured.gbs < 20_000
