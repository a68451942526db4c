import gzip
import json
import shutil

import pytest

from pruner_offline.tenset.records import BadLine, Record, parse_workload_key, read_records
from pruner_offline.tenset.steps import (
    STEP_CODES, Annotation, AnnotationStep, CacheReadStep, CacheWriteStep, ComputeAtStep,
    ComputeInlineStep, ComputeRootStep, FollowFusedSplitStep, FollowSplitStep, FuseStep,
    PragmaStep, ReorderStep, RfactorStep, SplitStep, StepError, StorageAlignStep, parse_step,
)

KEY = json.dumps(["023dee82f41c4b3ee991e7ec3fe00350", [32, 64], [10, 64], [1, 10], [32, 10]])
TARGET = "llvm -keys=cpu -mcpu=core-avx2"
HW = [1, 64, 64, 0, 0, 0, 0, 0]

# One instance of every step code, with the object it must parse to.
EVERY_STEP = [
    (["SP", 2, 0, 32, [1, 1, 8], 1], SplitStep(2, 0, 32, (1, 1, 8), True)),
    (["FSP", 4, 0, 1, 3], FollowSplitStep(4, 0, 1, 3)),
    (["FFSP", 4, 0, [4, 3, 2, 1], 1, 1], FollowFusedSplitStep(4, 0, (4, 3, 2, 1), 1, True)),
    (["RE", 2, [0, 4, 1, 5]], ReorderStep(2, (0, 4, 1, 5))),
    (["FU", 6, [0, 1, 2, 3]], FuseStep(6, (0, 1, 2, 3))),
    (["AN", 6, 0, 5], AnnotationStep(6, 0, Annotation.BLOCK_X)),
    (["PR", 5, 0, "auto_unroll_max_step$64"], PragmaStep(5, 0, "auto_unroll_max_step$64")),
    (["CA", 3, 4, 11], ComputeAtStep(3, 4, 11)),
    (["CI", 1], ComputeInlineStep(1)),
    (["CR", 4], ComputeRootStep(4)),
    (["CHR", 2, "shared", [3]], CacheReadStep(2, "shared", (3,))),
    (["CHW", 3, "local"], CacheWriteStep(3, "local")),
    (["RF", 2, 1, 0], RfactorStep(2, 1, 0)),
    (["SA", 3, 2, 32, 1], StorageAlignStep(3, 2, 32, 1)),
]


def _line(steps, version="v0.6", task_tail=(HW, "", 0, []), result=([1e-5, 2e-5], 0, 0.5, 1700000000)):
    task = [KEY, TARGET, *task_tail]
    return json.dumps({"i": [task, [[], steps]], "r": list(result), "v": version})


def test_every_step_code_parses_to_its_typed_object():
    assert {raw[0] for raw, _ in EVERY_STEP} == set(STEP_CODES)
    for raw, expected in EVERY_STEP:
        step = parse_step(raw)
        assert step == expected
        assert step.code == raw[0]
    assert parse_step(["PR", 5, 0, "auto_unroll_max_step$64"]).auto_unroll_max_step == 64
    assert parse_step(["SP", 3, 20, None, [None, 2], 0]) == SplitStep(3, 20, None, (None, 2), False)


@pytest.mark.parametrize("raw, reason", [
    (["XX", 1], "unknown step code"),
    (["SP", 2, 0, 32, [1, 1, 8]], "takes 5 arguments"),
    (["AN", 2, 0, 99], "unknown annotation"),
    (["CA", 3, "4", 11], "expected an integer"),
    (["RE", 2, "0,1"], "expected a list"),
    ([], "non-empty list"),
])
def test_bad_steps_are_rejected_with_a_reason(raw, reason):
    with pytest.raises(StepError, match=reason):
        parse_step(raw)


@pytest.mark.parametrize("version, task_tail, has_hw, layout", [
    ("v0.6", (HW, "", 2, ["p0"]), True, 2),
    ("v0.5", (HW, "", 0), True, 0),
    ("v0.4", (HW, ""), True, None),
    ("v0.3", (HW,), True, None),
    ("v0.2", (), False, None),
])
def test_every_log_version_reads(tmp_path, version, task_tail, has_hw, layout):
    path = tmp_path / "r.json"
    steps = [raw for raw, _ in EVERY_STEP]
    result = ([1e-5, 3e-5], 0, 0.5, 1700000000) if version != "v0.2" else ([1e-5, 3e-5], 0)
    path.write_text(_line(steps, version, task_tail, result) + "\n")
    (rec,) = list(read_records(path))
    assert isinstance(rec, Record), rec
    assert rec.version == version
    assert rec.workload_key.hash == "023dee82f41c4b3ee991e7ec3fe00350"
    assert rec.workload_key.args == ((32, 64), (10, 64), (1, 10), (32, 10))
    assert (rec.hardware_params is not None) == has_hw
    if has_hw:
        assert rec.hardware_params.vector_unit_bytes == 64
    assert rec.layout_rewrite == layout
    assert rec.steps == tuple(obj for _, obj in EVERY_STEP)
    assert rec.mean_cost == pytest.approx(2e-5)
    assert rec.target_kind == "llvm"
    if version == "v0.6":
        assert rec.input_names == ("p0",)


def test_bad_lines_are_counted_with_file_and_line_and_reading_goes_on(tmp_path):
    good = _line([["CI", 1]])
    lines = [
        "# a comment",
        good,
        good[: len(good) // 2],  # truncated in the middle of the file
        "{this is not json}",
        _line([["ZZ", 1]]),  # unknown step code
        json.dumps({"i": [[KEY, TARGET, HW], [[], []]]}),  # no results
        json.dumps({"i": [[KEY, TARGET, [1, "x"]], [[], []]], "r": [[1.0], 0, 0, 0]}),
        json.dumps([1, 2, 3]),
        "",
        good,
        good[:40],  # truncated last line, no newline
    ]
    path = tmp_path / "mixed.json"
    path.write_text("\n".join(lines))
    items = list(read_records(path))
    records = [i for i in items if isinstance(i, Record)]
    bad = {i.source.line: i.reason for i in items if isinstance(i, BadLine)}
    assert [r.source.line for r in records] == [2, 10]
    assert sorted(bad) == [3, 4, 5, 6, 7, 8, 11]
    assert bad[3].startswith("malformed JSON") or bad[3].startswith("truncated")
    assert bad[4].startswith("malformed JSON")
    assert "unknown step code 'ZZ'" in bad[5]
    assert "missing field 'r'" in bad[6]
    assert "hardware params" in bad[7]
    assert "not a JSON object" in bad[8]
    assert bad[11].startswith("truncated line")
    assert str(next(i for i in items if isinstance(i, BadLine))).startswith(f"{path}:3: ")


def test_gzip_reads_the_same_records_as_plain(tmp_path, tenset_mini):
    src = next((tenset_mini / "to_measure_programs").glob("*.json"))
    gz = tmp_path / (src.name + ".gz")
    with open(src, "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    plain = [r for r in read_records(src) if isinstance(r, Record)]
    packed = [r for r in read_records(gz) if isinstance(r, Record)]
    assert len(plain) == 100
    assert [(r.raw_steps, r.costs) for r in plain] == [(r.raw_steps, r.costs) for r in packed]


def test_a_gzip_file_cut_short_keeps_its_readable_lines(tmp_path, tenset_mini):
    src = next((tenset_mini / "to_measure_programs").glob("*.json"))
    blob = gzip.compress(src.read_bytes())
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(blob[: len(blob) // 2])
    items = list(read_records(cut))
    assert 0 < sum(isinstance(i, Record) for i in items) < 100
    assert isinstance(items[-1], BadLine)


def test_the_mini_dataset_parses_without_a_bad_line(tenset_mini):
    files = sorted((tenset_mini / "measure_records").rglob("*.json"))
    items = [i for f in files for i in read_records(f)]
    assert len(items) == 1103
    assert not [i for i in items if isinstance(i, BadLine)]
    assert sum(not r.ok for r in items) == 4
    for r in items[:50]:
        assert r.steps  # typed steps build for real records


def test_workload_keys_are_canonical():
    a = parse_workload_key('["abc", [1, 2],[3]]')
    b = parse_workload_key('["abc",[1,2],[3]]')
    assert a.text == b.text and a.args == ((1, 2), (3,))
    with pytest.raises(ValueError):
        parse_workload_key("[1, 2]")
