"""Search tasks from TenSet's ``network_info/`` pickles, read without TVM.

``all_tasks.pkl`` is a pickled list of SearchTask; each ``((net,[shape]),kind).task.pkl``
is ``(tasks, weights)`` for one network, the weight being how often the task occurs in it.
Both go through the restricted unpickler; the compute graph inside each task is decoded
only when asked for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Union

from .records import HardwareParams, parse_workload_key
from .safe_pickle import TVMObject, safe_load
from .te_graph import ComputeGraph, decode_graph


class TaskFileError(ValueError):
    """A task pickle whose content is not what TenSet writes."""


@dataclass(frozen=True)
class Task:
    workload_key: str  # canonical JSON text, the join key with records (with target_kind)
    target_kind: str  # "llvm", "cuda", ...
    target: str  # e.g. "cuda -arch=sm_37 -max_num_threads=1024 -thread_warp_size=32"
    hardware_params: Optional[HardwareParams]
    layout_rewrite_option: int
    desc: str
    dag_json: str = field(repr=False, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.workload_key, self.target_kind)

    @cached_property
    def graph(self) -> ComputeGraph:
        return decode_graph(self.dag_json)


@dataclass(frozen=True)
class NetworkTasks:
    """One ``*.task.pkl``: a network's tasks for one target, with their weights."""

    name: str  # e.g. "resnet_18"
    input_shape: str  # e.g. "[(1,3,224,224)]"
    target_kind: str
    tasks: tuple[Task, ...]
    weights: tuple[int, ...]
    path: str


# ---------------------------------------------------------------- SaveJSON helpers


def _graph_nodes(text: str, what: str) -> tuple[list, int]:
    try:
        g = json.loads(text)
        return g["nodes"], int(g["root"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        raise TaskFileError(f"{what} is not a SaveJSON graph") from None


def _node_value(nodes: list, i: int) -> Any:
    """A small SaveJSON value (string, int, array, map) as plain Python."""
    n = nodes[i]
    kind = str(n.get("type_key", "")).split(".")[-1]
    if kind == "String":
        return n.get("repr_str", "")
    if kind in ("IntImm", "FloatImm"):
        v = n["attrs"]["value"]
        return int(v) if kind == "IntImm" else float(v)
    if kind == "Array":
        return [_node_value(nodes, int(x)) for x in n.get("data", [])]
    if kind == "Map":
        return {k: _node_value(nodes, int(v)) for k, v in zip(n.get("keys", []), n.get("data", []))}
    return None


def _target(obj: Any) -> tuple[str, str]:
    """(kind, target string) from a pickled Target."""
    if not isinstance(obj, TVMObject) or obj.handle is None:
        raise TaskFileError("task target is not a pickled Target")
    nodes, root = _graph_nodes(obj.handle, "target")
    attrs = nodes[root].get("attrs", {})
    try:
        kind = _node_value(nodes, int(nodes[int(attrs["kind"])]["attrs"]["name"]))
        options = _node_value(nodes, int(attrs["attrs"])) or {}
        keys = _node_value(nodes, int(attrs["keys"])) or []
    except (KeyError, ValueError, IndexError, TypeError):
        raise TaskFileError("task target graph has no kind") from None
    parts = [str(kind)]
    if keys:
        parts.append("-keys=" + ",".join(map(str, keys)))
    for k in sorted(options):
        v = options[k]
        parts.append(f"-{k}=" + (",".join(map(str, v)) if isinstance(v, list) else str(v)))
    return str(kind), " ".join(parts)


_HW_FIELDS = ("num_cores", "vector_unit_bytes", "cache_line_bytes", "max_shared_memory_per_block",
              "max_local_memory_per_block", "max_threads_per_block", "max_vthread_extent", "warp_size")


def _hardware(obj: Any) -> Optional[HardwareParams]:
    if obj is None:
        return None
    if not isinstance(obj, TVMObject) or obj.handle is None:
        raise TaskFileError("task hardware params are not a pickled HardwareParams")
    nodes, root = _graph_nodes(obj.handle, "hardware params")
    attrs = nodes[root].get("attrs", {})
    try:
        return HardwareParams(*(int(attrs[f]) for f in _HW_FIELDS if f in attrs))
    except (TypeError, ValueError):
        raise TaskFileError("hardware params are not integers") from None


def task_from_pickled(obj: Any) -> Task:
    """A Task from the inert holder of a pickled SearchTask."""
    if not isinstance(obj, TVMObject) or obj.type_name != "SearchTask" or not isinstance(obj.state, dict):
        raise TaskFileError(f"expected a SearchTask, found {obj!r}")
    st = obj.state
    dag = st.get("compute_dag")
    tensors = dag.state.get("tensors") if isinstance(dag, TVMObject) and isinstance(dag.state, dict) else None
    if not isinstance(tensors, str):
        raise TaskFileError("SearchTask has no compute DAG")
    raw_key = st.get("workload_key")
    if not isinstance(raw_key, str):
        raise TaskFileError("SearchTask has no workload key")
    kind, target = _target(st.get("target"))
    desc = st.get("desc")
    return Task(
        workload_key=parse_workload_key(raw_key).text,
        target_kind=kind,
        target=target,
        hardware_params=_hardware(st.get("hardware_params")),
        layout_rewrite_option=int(st.get("layout_rewrite_option") or 0),
        desc=desc if isinstance(desc, str) else "",
        dag_json=tensors,
    )


def load_all_tasks(path: Union[str, Path]) -> list[Task]:
    """``all_tasks.pkl``: a pickled list of SearchTask."""
    obj = safe_load(path)
    if not isinstance(obj, list):
        raise TaskFileError(f"{path}: expected a list of SearchTask, found {type(obj).__name__}")
    return [task_from_pickled(t) for t in obj]


_NETWORK_FILE = re.compile(r"^\(\((?P<name>[^,]+),(?P<shape>\[.*\])\),(?P<kind>[^)]+)\)\.task\.pkl$")


def parse_network_filename(filename: str) -> Optional[tuple[str, str, str]]:
    """``((resnet_18,[(1,3,224,224)]),cuda).task.pkl`` -> ("resnet_18", "[(1,3,224,224)]", "cuda")."""
    m = _NETWORK_FILE.match(filename)
    return (m["name"], m["shape"], m["kind"]) if m else None


def load_network_tasks(path: Union[str, Path]) -> NetworkTasks:
    p = Path(path)
    parsed = parse_network_filename(p.name)
    if parsed is None:
        raise TaskFileError(f"{p}: not a network task file name ((NAME,[SHAPE]),TARGET).task.pkl")
    name, shape, kind = parsed
    obj = safe_load(p)
    if not (isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], list) and isinstance(obj[1], list)):
        raise TaskFileError(f"{p}: expected (tasks, weights)")
    tasks, weights = obj
    if len(tasks) != len(weights) or not all(isinstance(w, int) for w in weights):
        raise TaskFileError(f"{p}: tasks and weights do not match")
    return NetworkTasks(name, shape, kind, tuple(task_from_pickled(t) for t in tasks), tuple(weights), str(p))
