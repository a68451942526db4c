import json
import os
import pickle

import pytest

from pruner_offline.tenset.records import Record, read_records
from pruner_offline.tenset.safe_pickle import UnsafePickleError, safe_load, safe_loads
from pruner_offline.tenset.tasks import load_all_tasks, load_network_tasks, parse_network_filename
from pruner_offline.tenset.te_graph import (
    BinOp, Call, ComputeOp, GraphDecodeError, Load, PlaceholderOp, Reduce, decode_graph, op_inputs,
)


class _WritesAFile:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


class _OpensAFile:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("payload", [_WritesAFile, _OpensAFile])
def test_a_malicious_pickle_is_refused_and_nothing_in_it_runs(tmp_path, payload):
    victim = tmp_path / "pwned"
    blob = pickle.dumps([payload(victim)])
    with pytest.raises(UnsafePickleError, match="refused to load global"):
        safe_loads(blob)
    assert not victim.exists()
    # the same payload hidden inside an otherwise genuine-looking task file
    path = tmp_path / "all_tasks.pkl"
    path.write_bytes(blob)
    with pytest.raises(UnsafePickleError):
        load_all_tasks(path)
    assert not victim.exists()


def test_tenset_task_pickles_load_without_tvm(tenset_mini):
    tasks = load_all_tasks(tenset_mini / "network_info" / "all_tasks.pkl")
    assert len(tasks) == 32
    assert sum(t.target_kind == "cuda" for t in tasks) == 19
    cuda = next(t for t in tasks if t.target_kind == "cuda")
    assert "-arch=sm_37" in cuda.target
    assert cuda.hardware_params.max_shared_memory_per_block == 49152
    assert {t.layout_rewrite_option for t in tasks if t.target_kind == "llvm"} == {0, 2}
    net = load_network_tasks(tenset_mini / "network_info" / "((mobilenet_v1,[(1,3,224,224)]),cuda).task.pkl")
    assert (net.name, net.target_kind, net.weights) == ("mobilenet_v1", "cuda", (5, 5, 1, 1, 1, 1, 1, 1))
    assert all(t.key in {x.key for x in tasks} for t in net.tasks)


def test_network_file_names():
    assert parse_network_filename("((resnet_50,[(1,3,224,224)]),cuda).task.pkl") == (
        "resnet_50", "[(1,3,224,224)]", "cuda")
    assert parse_network_filename("((bert_base,[(1,128)]),llvm).task.pkl")[0] == "bert_base"
    assert parse_network_filename("all_tasks.pkl") is None


def test_compute_graphs_decode_in_ansor_stage_order(tenset_mini):
    tasks = {t.key: t for t in load_all_tasks(tenset_mini / "network_info" / "all_tasks.pkl")}
    conv = next(t for t in tasks.values() if t.target_kind == "cuda" and "0fad1b42" in t.workload_key
                and "[1, 14, 14, 256]" in t.workload_key)
    g = conv.graph
    assert [op.name for op in g.ops] == ["p0", "pad_temp", "p1", "conv2d_nhwc"]
    assert isinstance(g.ops[0], PlaceholderOp) and g.ops[0].shape == (1, 14, 14, 256)
    conv_op = g.ops[3]
    assert isinstance(conv_op, ComputeOp) and conv_op.shape == (1, 7, 7, 512)
    assert [a.extent for a in conv_op.reduce_axes] == [1, 1, 256]
    assert isinstance(conv_op.body[0], Reduce)
    assert op_inputs(conv_op) == [1, 2]
    # Every record's first step must address a stage that exists and can take it.
    for path in list((tenset_mini / "to_measure_programs").glob("*.json")) + list(
            (tenset_mini / "measure_records").rglob("*.json")):
        for rec in read_records(path):
            assert isinstance(rec, Record)
            ops = tasks[(rec.workload_key.text, rec.target_kind)].graph.ops
            first = rec.steps[0]
            assert first.stage < len(ops)
            if first.code != "CHR":
                assert isinstance(ops[first.stage], ComputeOp), (path.name, first)


def _renamed(dag_json: str, mapping: dict) -> str:
    g = json.loads(dag_json)
    for n in g["nodes"]:
        n["type_key"] = mapping.get(n["type_key"], n["type_key"])
    return json.dumps(g)


def test_newer_type_keys_decode_the_same(tenset_mini):
    tasks = load_all_tasks(tenset_mini / "network_info" / "all_tasks.pkl")
    newer = {"ComputeOp": "te.ComputeOp", "PlaceholderOp": "te.PlaceholderOp", "Tensor": "te.Tensor",
             "IntImm": "ir.IntImm", "FloatImm": "ir.FloatImm", "Range": "ir.Range", "Array": "ffi.Array",
             "Map": "ffi.Map", "runtime.String": "ffi.String", "Op": "ir.Op"}
    for t in tasks:
        assert decode_graph(_renamed(t.dag_json, newer)) == t.graph


def test_softmax_and_winograd_graphs_are_complete(tenset_mini):
    tasks = load_all_tasks(tenset_mini / "network_info" / "all_tasks.pkl")
    wino = next(t for t in tasks if t.target_kind == "cuda" and "7f3fee61" in t.workload_key).graph
    names = [op.name for op in wino.ops]
    assert names.index("data_pack") < names.index("bgemm") < names.index("inverse")
    for idx, op in enumerate(wino.ops):
        assert all(src < idx for src in op_inputs(op))  # a topological order
    softmax = next(t for t in tasks if "7d79c516" in t.workload_key).graph
    exp = softmax.ops[2]
    assert exp.name == "T_softmax_exp" and op_inputs(exp) == [0, 1]
    (call,) = exp.body
    assert isinstance(call, Call) and call.op == "tir.exp"
    (diff,) = call.args
    assert isinstance(diff, BinOp) and diff.op == "sub"
    assert isinstance(diff.a, Load) and diff.a.op == 0 and len(diff.a.indices) == 2
    assert isinstance(diff.b, Load) and diff.b.op == 1 and diff.b.indices == diff.a.indices[:1]


@pytest.mark.parametrize("text, message", [
    ("not json", "not JSON"),
    ('{"root_index": 3, "nodes": []}', "tvm-ffi JSON format"),
    ('{"root": 1, "nodes": [{"type_key": ""}, {"type_key": "IntImm", "attrs": {"value": "1"}}]}', "expected an Array"),
    ('{"root": 1, "nodes": [{"type_key": ""}, {"type_key": "Array", "data": [7]}]}', "missing node 7"),
])
def test_broken_graphs_raise_a_clear_error(text, message):
    with pytest.raises(GraphDecodeError, match=message):
        decode_graph(text)


def test_real_pickles_of_every_kind_load(tenset_mini):
    """all_tasks.pkl (a list of SearchTask), *.task.pkl ((tasks, weights)) and *.relay.pkl (a tuple
    whose parts are plain values): each loads to what TenSet wrote, with the parts in place."""
    kinds = set()
    for path in (tenset_mini / "network_info").glob("*.pkl"):
        obj = safe_load(path)
        if path.name == "all_tasks.pkl":
            assert isinstance(obj, list) and len(obj) == 32 and all(type(t).__name__ == "SearchTask" for t in obj)
            kinds.add("all_tasks")
        elif path.name.endswith(".task.pkl"):
            tasks, weights = obj
            assert len(tasks) == len(weights) > 0 and all(isinstance(w, int) and w > 0 for w in weights)
            kinds.add("task")
        else:
            assert path.name.endswith(".relay.pkl") and isinstance(obj, tuple) and len(obj) == 3
            kinds.add("relay")
    assert kinds == {"all_tasks", "task", "relay"}
