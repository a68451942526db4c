"""Large blocks straight from the operating system, so that a long out-of-core run's heap stays flat.

glibc serves a request below its mmap threshold from the heap, and raises that threshold (up to
32 MB) whenever a block above it is freed. An out-of-core epoch allocates and frees batch tensors
and read buffers of a few MB, of sizes that vary with each batch's statements; after the first few
are freed they all come from the heap, which fragments and grows with the epoch's length: peak RSS
of one PaCM epoch rose 1.22× from 0.1 M to 10 M records while the store's reads stayed flat at
~107 MB (bench/scale.py). A fixed threshold hands every block above it back when it is freed.
4 MiB: a buffer's reads and the largest batch tensors go to mmap, the many smaller blocks of each
step stay on the heap, where reusing them costs nothing. Measured at 1 M records over 600 batches:
glibc's default 701 MB peak, RSS still rising (614 → 625 MB from batch 500 to 600), 0.095 s a batch;
4 MiB 674 MB, flat at ~580 MB from batch 200 on, 0.096 s; 1 MiB 663 MB but 0.123 s (a fresh
mmap is faulted in and zeroed page by page, for every step's tensors).
"""

from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3  # glibc's malloc.h; setting it also stops the threshold's dynamic rise
THRESHOLD_BYTES = 4 << 20


def return_large_blocks(threshold: int = THRESHOLD_BYTES) -> bool:
    """Have glibc's malloc serve blocks of ``threshold`` bytes and more by mmap, from now on, for this
    whole process. False where the C library has no ``mallopt`` (macOS, musl): nothing changes."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, threshold) == 1
