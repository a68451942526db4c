"""Progress of long work: a live bar on a terminal, a plain line now and then in a log file.

tqdm redraws its bar with carriage returns; written into a file that is not a terminal (a batch
job's log) those become one line megabytes long, so there a short line is printed instead, at most
every ``log_every`` seconds and once at the end.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from tqdm import tqdm


class Progress:
    def __init__(self, desc: str, unit: str, total: Optional[int] = None, quiet: bool = False,
                 stream: TextIO = sys.stderr, log_every: float = 30.0):
        self.desc, self.unit, self.total = desc, unit, total
        self.stream, self.log_every = stream, log_every
        self.quiet = quiet
        self.done = 0
        self.start = self.last_line = time.monotonic()
        tty = hasattr(stream, "isatty") and stream.isatty()
        self.bar = tqdm(total=total, unit=unit, desc=desc, file=stream) if tty and not quiet else None

    def set_total(self, total: int) -> None:
        """The amount of work, once it is known (after the work already done is counted)."""
        self.total = total
        if self.bar is not None:
            self.bar.reset(total=total)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif not self.quiet and time.monotonic() - self.last_line >= self.log_every:
            self._line()

    def _line(self) -> None:
        self.last_line = time.monotonic()
        rate = self.done / max(self.last_line - self.start, 1e-9)
        of = f"/{self.total}" if self.total else ""
        eta = ""
        if self.total and rate > 0 and self.done < self.total:
            left = (self.total - self.done) / rate
            eta = f", {left / 3600:.1f} h left" if left >= 3600 else f", {left / 60:.0f} min left"
        print(f"{self.desc}: {self.done}{of} {self.unit} ({rate:.2f} {self.unit}/s{eta})", file=self.stream, flush=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
        elif not self.quiet and self.done:
            self._line()
