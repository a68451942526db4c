"""A restricted unpickler for TenSet's TVM pickles.

A pickle is a program: ``pickle.load`` on a file from the internet runs whatever the file
names. TenSet's pickles only ever name a handful of TVM classes (reduced to
``{"handle": SaveJSON(obj)}`` or a dict of fields by TVM's ``__getstate__``). This
unpickler maps exactly those names to inert holders and refuses every other global
before anything is called, so no code from the file ever runs.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any, Union


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle names a global outside the allow-list."""


class TVMObject:
    """An inert stand-in for a pickled TVM object: its class name and its saved state."""

    type_name = "Object"

    def __init__(self, *args: Any):
        self.args = args
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"TVMObject({self.type_name})"

    @property
    def handle(self) -> Union[str, None]:
        """The SaveJSON text for objects TVM pickles as ``{"handle": ...}``."""
        if isinstance(self.state, dict) and isinstance(self.state.get("handle"), str):
            return self.state["handle"]
        return None


class TVMString(str):
    """``tvm.runtime.container.String`` (a str subclass, rebuilt by NEWOBJ)."""

    def __setstate__(self, state: Any) -> None:
        pass


def _holder_class(type_name: str) -> type:
    return type(type_name, (TVMObject,), {"type_name": type_name})


def _new_object(cls: Any) -> TVMObject:
    # TVM pickles objects as ``_new_object(cls)`` followed by BUILD(state).
    if not (isinstance(cls, type) and issubclass(cls, TVMObject)):
        raise UnsafePickleError(f"_new_object called with {cls!r}, not an allowed TVM class")
    obj = cls.__new__(cls)
    obj.args, obj.state = (), None
    return obj


_TVM_CLASSES = [
    ("tvm.runtime.object", "Object"),
    ("tvm.runtime.container", "ADT"),
    ("tvm.ir.container", "Array"),
    ("tvm.ir.container", "Map"),
    ("tvm.target.target", "Target"),
    ("tvm.auto_scheduler.search_task", "SearchTask"),
    ("tvm.auto_scheduler.search_task", "HardwareParams"),
    ("tvm.auto_scheduler.search_task", "TuningOptions"),
    ("tvm.auto_scheduler.compute_dag", "ComputeDAG"),
    ("tvm.auto_scheduler.measure", "MeasureInput"),
    ("tvm.auto_scheduler.measure", "MeasureResult"),
    ("tvm.auto_scheduler.loop_state", "State"),
    ("tvm.te.tensor", "Tensor"),
]

ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    **{key: _holder_class(key[1]) for key in _TVM_CLASSES},
    ("tvm.runtime.object", "_new_object"): _new_object,
    ("tvm.runtime.container", "String"): TVMString,
}


class RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"refused to load global '{module}.{name}': not on the allow-list of TVM "
                "classes that TenSet pickles contain (the file may be malicious or not a TenSet pickle)"
            ) from None


def safe_loads(data: bytes) -> Any:
    return RestrictedUnpickler(io.BytesIO(data)).load()


def safe_load(path: Union[str, Path]) -> Any:
    with open(path, "rb") as f:
        return RestrictedUnpickler(f).load()
