"""What of Lightning's own output reaches a user of ``pretrain`` and ``compare``."""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager

from lightning.fabric.utilities.warnings import PossibleUserWarning

# Lightning's messages that say nothing to a user of pretrain: the args one warns of LightningCLI
# given a command line of its own while the process has another (pretrain's, which it was made
# from); a deprecation inside Lightning's own code; and the caution about an iterable dataset's
# length with several workers, which ChunkStream deals each its own share of.
_NOT_FOR_USERS = ("LightningCLI's args parameter", r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                  "Your `IterableDataset` has `__len__` defined")


@contextmanager
def lightning_voice(quiet: bool):
    """Lightning's warnings that are not for our users left out; with ``quiet``, its start-up
    report (seed, accelerators, tips) and its hints on the Trainer's settings (PossibleUserWarning:
    a store of few batches is smaller than the logging interval, a data loader could use more
    workers) too: what a quiet run prints is its result."""
    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "lightning.fabric")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        for message in _NOT_FOR_USERS:
            warnings.filterwarnings("ignore", message=message)
        if quiet:
            warnings.filterwarnings("ignore", category=PossibleUserWarning)
            for lg in loggers:
                lg.setLevel(logging.WARNING)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
