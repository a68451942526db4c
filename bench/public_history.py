"""Build ``datasets/ansor-public-history``: the Ansor record lines TVM's auto-scheduler tutorials
published (each version of their ``ci_logs`` in TVM's git history, log formats v0.2 to v0.6) whose
task can be known, and the record lines TVM's own unit tests embedded (v0.1, v0.6), in TenSet's
layout, with the task pickles to rebuild each compute and Ansor's own features of every line under
``oracle/``. The replay tests read it: records of five log versions that nobody on this project
produced.

Runs under an interpreter with hhb-tvm (TVM 0.16 with Ansor, Python 3.10), never the package's,
after bench/public_history_candidates.py has run under the package's:

    git clone https://github.com/apache/tvm /tmp/tvm-git      # the history, not a build
    python bench/public_history_candidates.py /tmp/tvm-git /tmp/candidates.json
    /tmp/ansor/bin/python bench/public_history.py /tmp/tvm-git datasets/ansor-public-history \
        --candidates /tmp/candidates.json

Tasks:
- the ResNet lines whose workload key carries the shapes (``[hash, shapes...]``: v0.5 and v0.6)
  take the task of ``datasets/ansor-public-logs`` with the same target kind and the same
  flattened shapes, where exactly one has them.
- older ResNet lines (v0.3) key by a bare hash of a compute DAG an older TVM built. One takes the
  task that is the only one to fit it: our replay of the line on the task succeeds
  (``--candidates``, from bench/public_history_candidates.py) and every split before the first
  attach step (CA, CR, CI) records the extent Ansor's own bound inference gives that loop after
  the steps before it. (Later splits may record extents of loops that a later attach moved.) On
  the 122 lines whose task is known by shapes, the true task always fits, and where exactly one
  task fits (86 of them) it is the true one.
- the operator tutorials' and tests' workloads (``matmul_add``, ``conv2d_layer``, ``sparse_dense``,
  ``matmul_auto_scheduler_test``, keyed by function name and arguments) are rebuilt from their
  definitions in TVM and keyed by their compute DAG, as TenSet keys its tasks.
Only the workload key of a line is rewritten; targets, hardware params, steps and costs are the
published bytes. The oracle's records get the target string hhb-tvm's parser accepts (as
ansor-public-logs' oracle README says; target options do not enter the features).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import types
from collections import defaultdict
from pathlib import Path

# tvm.topi imports relay, whose hhb frontends need tflite; the computes below need neither
sys.modules["tvm.relay.frontend"] = types.ModuleType("tvm.relay.frontend")

import tvm  # noqa: E402
from tvm import auto_scheduler, te, topi  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ansor_measure import write_oracle  # noqa: E402
from ansor_sample import file_name  # noqa: E402
from public_history_candidates import NETWORK_LOGS, PUBLIC_TASKS, bare_hash, published_lines  # noqa: E402

# hardware params of a line too old to carry them (v0.2): Ansor's defaults for the kind
DEFAULT_HW = {"llvm": [-1, 64, 64, 0, 0, 0, 0, 0], "cuda": [-1, 16, 64, 49152, 2147483647, 1024, 8, 32]}


def matmul_add(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    C = te.placeholder((N, M), name="C", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    matmul = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul",
                        attrs={"layout_free_placeholders": [B]})
    return [A, B, C, te.compute((N, M), lambda i, j: matmul[i, j] + C[i, j], name="out")]


def conv2d_layer(N, H, W, CO, CI, KH, KW, stride, padding):
    data = te.placeholder((N, CI, H, W), name="data")
    kernel = te.placeholder((CO, CI, KH, KW), name="kernel")
    bias = te.placeholder((1, CO, 1, 1), name="bias")
    conv = topi.nn.conv2d_nchw(data, kernel, stride, padding, dilation=1, out_dtype="float32")
    return [data, kernel, bias, topi.nn.relu(conv + bias)]


def sparse_dense(M, N, K, w_data_shape, w_indices_shape, w_indptr_shape, dtype):
    X = te.placeholder(shape=(M, K), dtype=dtype)
    W_data = te.placeholder(shape=w_data_shape, dtype=dtype)
    W_indices = te.placeholder(shape=w_indices_shape, dtype="int32")
    W_indptr = te.placeholder(shape=w_indptr_shape, dtype="int32")
    B = te.placeholder(shape=(M, N), dtype=dtype)
    out = topi.nn.sparse_dense(topi.nn.relu(X), W_data, W_indices, W_indptr)
    out = te.compute((M, N), lambda i, j: out[i, j] + B[i, j], name="BiasAdd")
    return [X, W_data, W_indices, W_indptr, B, topi.nn.relu(out)]


def matmul_auto_scheduler_test(N, M, K):  # tvm.testing.auto_scheduler's
    A = te.placeholder((N, K), name="A")
    B = te.placeholder((K, M), name="B")
    k = te.reduce_axis((0, K), name="k")
    return [A, B, te.compute((N, M), lambda i, j: te.sum(A[i][k] * B[k][j], axis=[k]), name="C",
                             attrs={"layout_free_placeholders": [B]})]


OPERATORS = {"matmul_add": matmul_add, "conv2d_layer": conv2d_layer, "sparse_dense": sparse_dense,
             "matmul_auto_scheduler_test": matmul_auto_scheduler_test}


def splits_fit(task: auto_scheduler.SearchTask, record: dict) -> bool:
    """Every split before the record's first attach step has the extent Ansor's bound inference
    gives its loop on ``task`` after the steps before it (see the module's docstring)."""
    steps = record["i"][1][1]
    for i, step in enumerate(steps):
        if step[0] in ("CA", "CR", "CI") and any(s[0] == "SP" for s in steps[:i]):
            return True
        if step[0] != "SP" or not step[3]:
            continue
        prefix = json.loads(json.dumps(record))
        prefix["i"][0][:2] = [task.workload_key, str(task.target)]
        prefix["i"][1][1] = steps[:i]
        inp, _ = auto_scheduler.measure_record.load_record_from_string(json.dumps(prefix))
        try:
            state = task.compute_dag.infer_bound_from_state(inp.state)
            extent = state.stages[step[1]].iters[step[2]].range
        except (tvm.error.TVMError, IndexError):  # a step Ansor cannot apply to this compute
            return False
        if extent is not None and int(extent.extent) != int(step[3]):
            return False
    return True


def flat_shapes(key: list) -> str:
    return json.dumps([x for s in key[1:] for x in (s if isinstance(s, list) else [s])])


def sanitized_target(target: str) -> str:
    target = target.replace(" -link-params=0", "")
    return target + " -mtriple=x86_64-linux-gnu" if target.startswith("llvm") and "-mtriple" not in target else target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tvm_git", type=Path, help="a clone of apache/tvm with its history")
    ap.add_argument("out", type=Path)
    ap.add_argument("--candidates", type=Path, help="bench/public_history_candidates.py's output; "
                    "without it the bare-hash ResNet lines are left out")
    args = ap.parse_args()
    with open(PUBLIC_TASKS, "rb") as f:  # a trusted local input: this script is not the package
        known = pickle.load(f)
    by_shapes = defaultdict(list)
    by_key = {}
    for t in known:
        by_shapes[(flat_shapes(json.loads(t.workload_key)), t.target.kind.name)].append(t)
        by_key[t.workload_key, t.target.kind.name] = t
        auto_scheduler.workload_registry.register_workload_tensors(t.workload_key, t.compute_dag.tensors)
    candidates = json.loads(args.candidates.read_text()) if args.candidates else {}

    used: dict[tuple[str, str], auto_scheduler.SearchTask] = {}  # (key, kind): a key can be both kinds'
    files: dict[Path, list[str]] = defaultdict(list)
    skipped: dict[str, int] = defaultdict(int)
    seen: set[str] = set()  # a line two logs share (resnet-18-NHWC-B1 was renamed ...-cuda) is kept once
    for log, lines in published_lines(args.tvm_git).items():
        for line in lines:
            if line in seen:
                continue
            seen.add(line)
            r = json.loads(line)
            old, kind = json.loads(r["i"][0][0]), r["i"][0][1].split()[0]
            if old[0] in OPERATORS:
                tensors = OPERATORS[old[0]](*old[1:])
                key = auto_scheduler.ComputeDAG(tensors).workload_key()
                if (key, kind) not in used:
                    auto_scheduler.workload_registry.register_workload_tensors(key, tensors)
                    hw = r["i"][0][2] if len(r["i"][0]) > 2 else DEFAULT_HW[kind]
                    used[key, kind] = auto_scheduler.SearchTask(
                        workload_key=key, target=sanitized_target(r["i"][0][1]),
                        hardware_params=auto_scheduler.HardwareParams(*hw))
            elif log in NETWORK_LOGS and len(old) > 1 and len(by_shapes[(flat_shapes(old), kind)]) == 1:
                task = by_shapes[(flat_shapes(old), kind)][0]
                key = task.workload_key
                used[key, kind] = task
            elif log in NETWORK_LOGS and bare_hash(line) and len(
                    fit := [by_key[k, kind] for k in candidates.get(line, ()) if splits_fit(by_key[k, kind], r)]) == 1:
                key = fit[0].workload_key
                used[key, kind] = fit[0]
            else:
                skipped[f"{log} {r.get('v')}"] += 1
                continue
            r["i"][0][0] = key
            files[args.out / "measure_records" / Path(log).stem / file_name(used[key, kind])].append(json.dumps(r))

    (args.out / "network_info").mkdir(parents=True, exist_ok=True)
    with open(args.out / "network_info" / "all_tasks.pkl", "wb") as f:
        pickle.dump(list(used.values()), f)
    names = json.loads((PUBLIC_TASKS.parents[1] / "oracle" / "index.json").read_text())["feature_names"]
    index = {}
    scratch = Path(tempfile.mkdtemp())
    for path, lines in sorted(files.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        rel = path.relative_to(args.out)
        parsed = [json.loads(line) for line in lines]
        for r in parsed:
            r["i"][0][1] = sanitized_target(r["i"][0][1])
        (scratch / path.name).write_text("".join(json.dumps(r) + "\n" for r in parsed))
        entry = {"lines": len(lines), "versions": sorted({r.get("v") for r in parsed})}
        try:
            write_oracle(scratch / path.name, args.out / "oracle" / rel.with_suffix(".npz"))
        except Exception as exc:  # Ansor gives no features at all (v0.1, v0.2 lines without hardware params)
            entry["oracle"] = f"none: {str(exc).strip().splitlines()[-1][:200]}"
        index[str(rel)] = entry
    (args.out / "oracle" / "index.json").write_text(json.dumps({"feature_names": names, "files": index}, indent=1))
    print(json.dumps({"lines": sum(len(v) for v in files.values()), "files": len(files), "tasks": len(used),
                      "skipped": dict(skipped)}))


if __name__ == "__main__":
    main()
