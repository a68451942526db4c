"""What a collection is (no TVM import: the command line is built from these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..measure.settings import MeasureSettings
from ..tuning.settings import available_cores


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` (0 <= i < N) -> (i, N); ValueError saying what is wrong."""
    i, _, n = text.partition("/")
    if not (i.isdigit() and n.isdigit() and 0 <= int(i) < int(n)):
        raise ValueError(f"{text!r}: expected I/N with 0 <= I < N, e.g. 0/4")
    return int(i), int(n)


@dataclass(frozen=True)
class CollectSettings:
    target_kind: str = field(default="llvm", metadata={
        "flag": "--target", "choices": ("llvm", "cuda"),
        "help": "cuda: built here with nvcc for --device's arch, measured on a visible GPU or through --rpc-tracker"})
    programs_per_task: int = field(default=128, metadata={"min": 1, "help": "programs measured per task in all "
                                                                             "(a rerun measures what is left)"})
    random_fraction: float = field(default=0.5, metadata={
        "min": 0.0, "max": 1.0, "help": "share of each batch drawn at random from the design space; the rest come "
                                        "from an evolutionary search driven by a random cost model"})
    batch_size: int = field(default=32, metadata={"flag": "--batch", "min": 1,
                                                  "help": "programs sampled, built and measured together"})
    population_size: int = field(default=256, metadata={"flag": "--population", "min": 2,
                                                        "help": "the evolutionary search's population"})
    seed: int = field(default=0, metadata={"min": 0, "help": "sampling seed (a task's is this plus its index)"})
    device: Optional[str] = field(default=None, metadata={
        "help": "cuda: the GPU to build for (h100, h200, a100, ...: its arch); default the visible GPU's"})
    num_cores: int = field(default_factory=available_cores, metadata={
        "flag": "--cores", "min": 1, "help": "llvm: the target's num-cores (default: the cores this process may use)"})
    shard: Optional[str] = field(default=None, metadata={
        "parse": lambda t: parse_shard(t) and t,
        "help": "I/N: collect only every N-th task from the I-th on (merge the N outputs with pruner-train merge)"})
    measure: MeasureSettings = field(default_factory=MeasureSettings)

    def __post_init__(self) -> None:
        if self.programs_per_task < 1 or self.batch_size < 1:
            raise ValueError("programs_per_task and batch_size must be at least 1")
        if not 0 <= self.random_fraction <= 1:
            raise ValueError(f"random_fraction must lie in [0, 1], not {self.random_fraction}")
        if self.shard is not None:
            parse_shard(self.shard)

    @property
    def shard_of(self) -> tuple[int, int]:
        return parse_shard(self.shard) if self.shard else (0, 1)
