"""Files replaced whole: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def check_replaceable(final: Path) -> None:
    """Refuse to replace anything but a regular file: a rename over a device, a FIFO or a socket
    replaces the node itself (run as root, ``--out /dev/null`` turned the machine's /dev/null
    into a regular file), and one over a directory fails only after the work."""
    if final.is_dir():
        raise IsADirectoryError(21, "is a directory; name the file to write", str(final))
    if final.exists() and not final.is_file():
        raise OSError(17, "exists and is not a regular file (a device, a FIFO or a socket), "
                          "which writing would replace; name a file to write", str(final))


@contextmanager
def atomic_write(final: Path) -> Iterator[Path]:
    """A temporary path beside ``final`` that replaces it when the block succeeds.

    When the block fails (a full disk, a read-only directory, an interrupt) the temporary file
    is removed, so a failed write leaves nothing behind, and an OSError without a file name
    (a write that ran out of space) gets ``final``'s, so the user learns which write failed."""
    check_replaceable(final)
    tmp = final.with_name(f"{final.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(final)) from exc
        raise
