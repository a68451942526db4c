"""Sample Ansor programs of operators TenSet's networks do not have (hhb-tvm: TVM 0.16's Ansor)
into a TenSet-layout directory with Ansor's own features: schedules of computes and step patterns
(rfactor, compute_root) that neither tenset-mini nor the public logs hold, to check the replay and
the features on (``bench/replay_rate.py``, ``pruner-train check-replay``,
tests/test_replay_sampled.py).

Runs under an interpreter with hhb-tvm, never the package's (it is not a dependency):

    python3.10 -m venv /tmp/ansor && /tmp/ansor/bin/pip install hhb-tvm numpy
    /tmp/ansor/bin/python bench/ansor_sample.py OUT [--per-task 24] [--seed 0]

Writes OUT/network_info/all_tasks.pkl (the tasks, pickled as TenSet pickles them),
OUT/to_measure_programs/([KEY],KIND).json (Ansor's initial population of each task, as TenSet's
dump_programs.py samples it; unmeasured) and OUT/oracle/ (Ansor's 164 per-store features of every
line, the layout of ../shared/ansor-public-logs/oracle/README.md).
"""

from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path

import numpy as np
import tvm
from tvm import auto_scheduler, te  # not topi: it imports relay, which needs hhb's frontends

LLVM = ("llvm -mcpu=core-avx2", auto_scheduler.HardwareParams(2, 32, 64, 0, 0, 0, 0, 0))
CUDA = ("cuda -keys=cuda,gpu -arch=sm_80 -max_num_threads=1024 -thread_warp_size=32",
        auto_scheduler.HardwareParams(-1, 16, 64, 49152, 2147483647, 1024, 8, 32))


def _pad(x, pad, value=0.0):
    """x padded by ``pad`` on its last two axes (NCHW-style), as TOPI's nn.pad writes it."""
    *lead, h, w = x.shape

    def body(*idx):
        *rest, i, j = idx
        inside = te.all(i >= pad, i < h + pad, j >= pad, j < w + pad)
        return te.if_then_else(inside, x[(*rest, i - pad, j - pad)], tvm.tir.const(value, x.dtype))
    return te.compute((*lead, h + 2 * pad, w + 2 * pad), body, name="pad")


def _layer_norm(n, d):
    x = te.placeholder((n, d), name="x")
    gamma, beta = te.placeholder((d,), name="gamma"), te.placeholder((d,), name="beta")
    k = te.reduce_axis((0, d), name="k")
    mean = te.compute((n,), lambda i: te.sum(x[i, k] / d, axis=k), name="mean")
    k2 = te.reduce_axis((0, d), name="k2")
    var = te.compute((n,), lambda i: te.sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i]) / d, axis=k2), name="var")
    out = te.compute((n, d), lambda i, j: (x[i, j] - mean[i]) / te.sqrt(var[i] + 1e-5) * gamma[j] + beta[j],
                     name="layer_norm")
    return [x, gamma, beta, out]


def _dense_gelu(m, n, k):
    a, w, b = te.placeholder((m, k), name="a"), te.placeholder((n, k), name="w"), te.placeholder((n,), name="b")
    r = te.reduce_axis((0, k), name="r")
    d = te.compute((m, n), lambda i, j: te.sum(a[i, r] * w[j, r], axis=r), name="dense")
    y = te.compute((m, n), lambda i, j: d[i, j] + b[j], name="bias")
    out = te.compute((m, n), lambda i, j: 0.5 * y[i, j] * (1.0 + te.erf(y[i, j] * 0.7071067811865476)), name="gelu")
    return [a, w, b, out]


def _conv_transpose(n, c, h, w, f, k, s):
    """Stride-s transposed convolution as TOPI computes it: the input dilated by s and padded by
    k-1, then a convolution with the flipped kernel."""
    x, wt = te.placeholder((n, c, h, w), name="x"), te.placeholder((c, f, k, k), name="w")
    dh, dw = (h - 1) * s + 1 + 2 * (k - 1), (w - 1) * s + 1 + 2 * (k - 1)

    def dilated(b, ci, i, j):
        ii, jj = i - (k - 1), j - (k - 1)
        ok = te.all(ii >= 0, jj >= 0, ii % s == 0, jj % s == 0, ii // s < h, jj // s < w)
        return te.if_then_else(ok, x[b, ci, ii // s, jj // s], tvm.tir.const(0.0, "float32"))
    data = te.compute((n, c, dh, dw), dilated, name="data_pad")
    rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, k), "ry"), te.reduce_axis((0, k), "rx")
    out = te.compute((n, f, dh - k + 1, dw - k + 1), lambda b, o, i, j: te.sum(
        data[b, rc, i + ry, j + rx] * wt[rc, o, k - 1 - ry, k - 1 - rx], axis=[rc, ry, rx]), name="conv2d_transpose")
    return [x, wt, out]


def _max_pool(n, c, h, w):
    x = te.placeholder((n, c, h, w), name="x")
    padded = _pad(x, 1, -3.4e38)
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    out = te.compute((n, c, h // 2, w // 2), lambda b, ci, i, j: te.max(
        padded[b, ci, i * 2 + ry, j * 2 + rx], axis=[ry, rx]), name="pool_max")
    return [x, out]


def _group_conv(n, c, h, w, f, g):
    x, wt = te.placeholder((n, c, h, w), name="x"), te.placeholder((f, c // g, 3, 3), name="w")
    padded = _pad(x, 1)
    rc, ry, rx = te.reduce_axis((0, c // g), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    out = te.compute((n, f, h, w), lambda b, o, i, j: te.sum(
        padded[b, o // (f // g) * (c // g) + rc, i + ry, j + rx] * wt[o, rc, ry, rx], axis=[rc, ry, rx]),
        name="group_conv2d")
    return [x, wt, out]


def _conv3d(n, d, h, w, c, f):
    x, wt = te.placeholder((n, d, h, w, c), name="x"), te.placeholder((3, 3, 3, c, f), name="w")
    rd, ry, rx, rc = (te.reduce_axis((0, 3), "rd"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx"),
                      te.reduce_axis((0, c), "rc"))
    out = te.compute((n, d - 2, h - 2, w - 2, f), lambda b, z, i, j, o: te.sum(
        x[b, z + rd, i + ry, j + rx, rc] * wt[rd, ry, rx, rc, o], axis=[rd, ry, rx, rc]), name="conv3d_ndhwc")
    return [x, wt, out]


def _batch_matmul_nn(b, m, n, k):
    x, y = te.placeholder((b, m, k), name="x"), te.placeholder((b, k, n), name="y")
    r = te.reduce_axis((0, k), name="r")
    return [x, y, te.compute((b, m, n), lambda q, i, j: te.sum(x[q, i, r] * y[q, r, j], axis=r), name="batch_matmul")]


def _conv_bias_relu(n, c, h, w, f):
    x, wt, bias = te.placeholder((n, c, h, w), name="x"), te.placeholder((f, c, 3, 3), name="w"), \
        te.placeholder((1, f, 1, 1), name="b")
    padded = _pad(x, 1)
    rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    conv = te.compute((n, f, h, w), lambda b, o, i, j: te.sum(
        padded[b, rc, i + ry, j + rx] * wt[o, rc, ry, rx], axis=[rc, ry, rx]), name="conv2d_nchw")
    out = te.compute((n, f, h, w), lambda b, o, i, j: te.max(conv[b, o, i, j] + bias[0, o, 0, 0], 0.0), name="relu")
    return [x, wt, bias, out]


def _softmax_3d(b, m, n):
    x = te.placeholder((b, m, n), name="x")
    k = te.reduce_axis((0, n), "k")
    mx = te.compute((b, m), lambda q, i: te.max(x[q, i, k], axis=k), name="max")
    e = te.compute((b, m, n), lambda q, i, j: te.exp(x[q, i, j] - mx[q, i]), name="exp")
    k2 = te.reduce_axis((0, n), "k2")
    s = te.compute((b, m), lambda q, i: te.sum(e[q, i, k2], axis=k2), name="expsum")
    return [x, te.compute((b, m, n), lambda q, i, j: e[q, i, j] / s[q, i], name="softmax")]


def _sigmoid_mul(n, c):
    x = te.placeholder((n, c), name="x")
    return [x, te.compute((n, c), lambda i, j: x[i, j] * te.sigmoid(x[i, j]), name="silu")]


def _depthwise_nchw(n, c, h, w):
    x, wt = te.placeholder((n, c, h, w), name="x"), te.placeholder((c, 1, 3, 3), name="w")
    padded = _pad(x, 1)
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    return [x, wt, te.compute((n, c, h, w), lambda b, ci, i, j: te.sum(
        padded[b, ci, i + ry, j + rx] * wt[ci, 0, ry, rx], axis=[ry, rx]), name="depthwise_conv2d_nchw")]


WORKLOADS = {
    "layer_norm": (_layer_norm, (128, 768)),
    "dense_gelu": (_dense_gelu, (64, 1024, 256)),
    "conv2d_transpose": (_conv_transpose, (1, 64, 14, 14, 32, 4, 2)),
    "max_pool2d": (_max_pool, (1, 64, 56, 56)),
    "group_conv2d": (_group_conv, (1, 64, 28, 28, 64, 4)),
    "conv3d_ndhwc": (_conv3d, (1, 8, 14, 14, 32, 32)),
    "batch_matmul_nn": (_batch_matmul_nn, (8, 64, 64, 128)),
    "conv2d_bias_relu_nchw": (_conv_bias_relu, (1, 64, 28, 28, 64)),
    "softmax_3d": (_softmax_3d, (4, 64, 128)),
    "silu": (_sigmoid_mul, (256, 1024)),
    "depthwise_nchw": (_depthwise_nchw, (1, 96, 28, 28)),
}


def task_of(name: str, target: tuple) -> auto_scheduler.SearchTask:
    make, args = WORKLOADS[name]
    tensors = make(*args)
    dag = auto_scheduler.ComputeDAG(tensors)
    key = dag.workload_key()
    auto_scheduler.workload_registry.register_workload_tensors(key, tensors)
    return auto_scheduler.SearchTask(compute_dag=dag, workload_key=key, target=tvm.target.Target(target[0]),
                                     hardware_params=target[1], desc=name)


def file_name(task: auto_scheduler.SearchTask) -> str:
    key = json.loads(task.workload_key)
    return "([" + ",".join(json.dumps(k, separators=(",", ":")) if not isinstance(k, str) else k
                           for k in key) + f"],{task.target.kind.name}).json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--per-task", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    (args.out / "network_info").mkdir(parents=True, exist_ok=True)
    (args.out / "to_measure_programs").mkdir(exist_ok=True)
    (args.out / "oracle" / "to_measure_programs").mkdir(parents=True, exist_ok=True)
    tasks, index = [], {}
    for target in (LLVM, CUDA):
        for name in WORKLOADS:
            task = task_of(name, target)
            policy = auto_scheduler.SketchPolicy(task, params={"sample_init_min_population": args.per_task},
                                                 seed=args.seed, verbose=0)
            states = list(policy.sample_initial_population())[:args.per_task]
            if not states:
                print(f"{name} {task.target.kind.name}: no states sampled")
                continue
            tasks.append(task)
            inputs = [auto_scheduler.MeasureInput(task, s) for s in states]
            results = [auto_scheduler.MeasureResult([0.0], 0, "", 0, 0) for _ in states]
            path = args.out / "to_measure_programs" / file_name(task)
            path.unlink(missing_ok=True)
            auto_scheduler.save_records(str(path), inputs, results)
            feats = auto_scheduler.feature.get_per_store_features_from_states(states, task)
            mats = [np.asarray(f, dtype=np.float32).reshape(-1, 164) if len(f) else np.zeros((0, 164), np.float32)
                    for f in feats]
            n_stores = np.array([len(m) for m in mats], dtype=np.int32)
            np.savez_compressed(args.out / "oracle" / "to_measure_programs" / path.with_suffix(".npz").name,
                                n_stores=n_stores, offsets=np.concatenate([[0], np.cumsum(n_stores * 164)]).astype(np.int64),
                                features=np.concatenate([m.ravel() for m in mats]),
                                labels=np.zeros(len(states), np.float32), cost_mean=np.zeros(len(states)),
                                error_no=np.zeros(len(states), np.int32))
            index[str(path.relative_to(args.out))] = {"workload": name, "target": str(task.target), "lines": len(states)}
            print(f"{name} {task.target.kind.name}: {len(states)} programs", flush=True)
    with open(args.out / "network_info" / "all_tasks.pkl", "wb") as f:
        pickle.dump(tasks, f)
    names = list(auto_scheduler.feature.get_per_store_feature_names())
    (args.out / "oracle" / "index.json").write_text(json.dumps({"feature_names": names, "files": index}, indent=1))


if __name__ == "__main__":
    main()
