"""Files replaced whole: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_write(final: Path) -> Iterator[Path]:
    """A temporary path beside ``final`` that replaces it when the block succeeds.

    When the block fails (a full disk, a read-only directory, an interrupt) the temporary file
    is removed, so a failed write leaves nothing behind, and an OSError without a file name
    (a write that ran out of space) gets ``final``'s, so the user learns which write failed."""
    tmp = final.with_name(f"{final.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(final)) from exc
        raise
