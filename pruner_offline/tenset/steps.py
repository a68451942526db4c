"""Ansor transform steps, as TenSet records store them, parsed into typed objects.

Stage and iterator arguments are indices into Ansor's state at the moment the step runs;
they are kept as indices here and resolved by the replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Callable, Optional, Union


class StepError(ValueError):
    """A step that is not one of Ansor's, or whose arguments do not fit its code."""


class Annotation(IntEnum):
    NONE = 0
    UNROLL = 1
    VECTORIZE = 2
    PARALLEL = 3
    VTHREAD = 4
    BLOCK_X = 5
    THREAD_X = 6
    BLOCK_Y = 7
    THREAD_Y = 8
    BLOCK_Z = 9
    THREAD_Z = 10
    TENSORIZE = 11


@dataclass(frozen=True, slots=True)
class SplitStep:
    stage: int
    iter: int
    extent: Optional[int]
    lengths: tuple[Optional[int], ...]
    inner_to_outer: bool
    code = "SP"


@dataclass(frozen=True, slots=True)
class FollowSplitStep:
    stage: int
    iter: int
    src_step: int
    n_split: int
    code = "FSP"


@dataclass(frozen=True, slots=True)
class FollowFusedSplitStep:
    stage: int
    iter: int
    src_steps: tuple[int, ...]
    level: int
    factor_or_nparts: bool
    code = "FFSP"


@dataclass(frozen=True, slots=True)
class ReorderStep:
    stage: int
    order: tuple[int, ...]
    code = "RE"


@dataclass(frozen=True, slots=True)
class FuseStep:
    stage: int
    iters: tuple[int, ...]
    code = "FU"


@dataclass(frozen=True, slots=True)
class AnnotationStep:
    stage: int
    iter: int
    annotation: Annotation
    code = "AN"


@dataclass(frozen=True, slots=True)
class PragmaStep:
    stage: int
    iter: int
    pragma: str
    code = "PR"

    @property
    def auto_unroll_max_step(self) -> Optional[int]:
        name, _, value = self.pragma.partition("$")
        return int(value) if name == "auto_unroll_max_step" and value.isdigit() else None


@dataclass(frozen=True, slots=True)
class ComputeAtStep:
    stage: int
    target_stage: int
    target_iter: int
    code = "CA"


@dataclass(frozen=True, slots=True)
class ComputeInlineStep:
    stage: int
    code = "CI"


@dataclass(frozen=True, slots=True)
class ComputeRootStep:
    stage: int
    code = "CR"


@dataclass(frozen=True, slots=True)
class CacheReadStep:
    stage: int
    scope: str
    reader_stages: tuple[int, ...]
    code = "CHR"


@dataclass(frozen=True, slots=True)
class CacheWriteStep:
    stage: int
    scope: str
    code = "CHW"


@dataclass(frozen=True, slots=True)
class RfactorStep:
    stage: int
    iter: int
    factor_iter: int
    code = "RF"


@dataclass(frozen=True, slots=True)
class StorageAlignStep:
    stage: int
    iter: int
    factor: int
    offset: int
    code = "SA"


Step = Union[
    SplitStep, FollowSplitStep, FollowFusedSplitStep, ReorderStep, FuseStep, AnnotationStep,
    PragmaStep, ComputeAtStep, ComputeInlineStep, ComputeRootStep, CacheReadStep,
    CacheWriteStep, RfactorStep, StorageAlignStep,
]


def _int(v: object) -> int:
    # bool is an int subclass, but never a valid index or length in a record
    if type(v) is int:
        return v
    raise StepError(f"expected an integer, got {v!r}")


def _opt_int(v: object) -> Optional[int]:
    return None if v is None else _int(v)


def _ints(v: object) -> tuple[int, ...]:
    if type(v) is not list:
        raise StepError(f"expected a list of integers, got {v!r}")
    return tuple(_int(x) for x in v)


def _str(v: object) -> str:
    if type(v) is str:
        return v
    raise StepError(f"expected a string, got {v!r}")


def _annotation(v: object) -> Annotation:
    try:
        return Annotation(_int(v))
    except ValueError:
        raise StepError(f"unknown annotation {v!r}") from None


def _split(a: list) -> SplitStep:
    if type(a[3]) is not list:
        raise StepError(f"expected a list of lengths, got {a[3]!r}")
    return SplitStep(_int(a[0]), _int(a[1]), _opt_int(a[2]), tuple(_opt_int(x) for x in a[3]), bool(_int(a[4])))


# code -> (number of arguments after the code, constructor)
_PARSERS: dict[str, tuple[int, Callable[[list], Step]]] = {
    "SP": (5, _split),
    "FSP": (4, lambda a: FollowSplitStep(_int(a[0]), _int(a[1]), _int(a[2]), _int(a[3]))),
    "FFSP": (5, lambda a: FollowFusedSplitStep(_int(a[0]), _int(a[1]), _ints(a[2]), _int(a[3]), bool(_int(a[4])))),
    "RE": (2, lambda a: ReorderStep(_int(a[0]), _ints(a[1]))),
    "FU": (2, lambda a: FuseStep(_int(a[0]), _ints(a[1]))),
    "AN": (3, lambda a: AnnotationStep(_int(a[0]), _int(a[1]), _annotation(a[2]))),
    "PR": (3, lambda a: PragmaStep(_int(a[0]), _int(a[1]), _str(a[2]))),
    "CA": (3, lambda a: ComputeAtStep(_int(a[0]), _int(a[1]), _int(a[2]))),
    "CI": (1, lambda a: ComputeInlineStep(_int(a[0]))),
    "CR": (1, lambda a: ComputeRootStep(_int(a[0]))),
    "CHR": (3, lambda a: CacheReadStep(_int(a[0]), _str(a[1]), _ints(a[2]))),
    "CHW": (2, lambda a: CacheWriteStep(_int(a[0]), _str(a[1]))),
    "RF": (3, lambda a: RfactorStep(_int(a[0]), _int(a[1]), _int(a[2]))),
    "SA": (4, lambda a: StorageAlignStep(_int(a[0]), _int(a[1]), _int(a[2]), _int(a[3]))),
}

STEP_CODES = tuple(_PARSERS)
# code -> length of the step's JSON list, code included
STEP_ARITY = {code: nargs + 1 for code, (nargs, _) in _PARSERS.items()}


def parse_step(raw: object) -> Step:
    """One step from its JSON form, e.g. ``["SP", 2, 0, 32, [1, 1, 8], 1]``."""
    if type(raw) is not list or not raw:
        raise StepError(f"step is not a non-empty list: {raw!r}")
    code = raw[0]
    entry = _PARSERS.get(code) if type(code) is str else None
    if entry is None:
        raise StepError(f"unknown step code {code!r}")
    nargs, make = entry
    if len(raw) != nargs + 1:
        raise StepError(f"step {code} takes {nargs} arguments, got {len(raw) - 1}")
    return make(raw[1:])
