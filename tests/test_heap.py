"""The out-of-core path's allocator setting (training/heap.py): freed batch-sized blocks go back."""

import platform
import subprocess
import sys
import textwrap

import pytest

from pruner_offline.training.data import StoreDataModule
from synthetic import synthetic_store

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's threshold is glibc's")

# ~5 MB blocks (above the 4 MiB threshold) of varying size, each followed on the heap by a small long-lived one, as batch
# tensors are among a run's small objects; glibc raises its mmap threshold when the first is freed
PROGRAM = textwrap.dedent("""
    import sys, numpy as np
    from pruner_offline.training.heap import return_large_blocks
    def rss_mb():
        return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
    if sys.argv[1] == "set":
        assert return_large_blocks()
    first = np.ones(5 << 17)
    del first
    big, pins = [], []
    for i in range(50):
        big.append(np.ones((5 << 17) + i))
        pins.append(np.ones(64))
    held = rss_mb()
    del big
    print(held, rss_mb())
""")


def _held_and_left(mode: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True)
    held, left = map(float, out.stdout.split())
    return held, left


@glibc
def test_freed_large_blocks_leave_the_process():
    held, left = _held_and_left("default")
    assert held > 200 and left > 0.8 * held  # glibc's own rule keeps them on the heap
    held, left = _held_and_left("set")
    assert held > 200 and left < held - 180  # ~250 MB freed, handed back


def test_out_of_core_setup_sets_it_and_in_memory_does_not(tmp_path, monkeypatch):
    import pruner_offline.training.data as data

    calls = []
    monkeypatch.setattr(data, "return_large_blocks", lambda: calls.append(1) or True)
    store = synthetic_store(tmp_path / "s.h5")
    for in_memory in (True, False):
        StoreDataModule(str(store), split="within_task:0.3", in_memory=in_memory).setup("fit")
    assert calls == [1]
