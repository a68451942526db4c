"""The replay's fidelity tool on a handful of real records: Ansor's features (oracle/) against ours."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tvm")

from pruner_offline.cli import main  # noqa: E402
from pruner_offline.replay.fidelity import (  # noqa: E402
    GROUPS, align_buffer_slots, buffer_slots, check_replay, group_of, match_statements)

NAMES = tuple(f"B{i}.f{k}" for i in range(5) for k in range(2)) + ("float_mad", "outer_prod")


@pytest.fixture(scope="module")
def dataset(tenset_mini):
    if not (tenset_mini / "oracle" / "index.json").is_file():
        pytest.skip(f"no oracle/ in {tenset_mini} (Ansor's features are needed to compare with)")
    return tenset_mini


def test_every_ansor_feature_has_a_group(dataset):
    names = json.loads((dataset / "oracle" / "index.json").read_text())["feature_names"]
    assert len(names) == 164
    assert {group_of(n) for n in names} == set(GROUPS)


def test_buffer_slots_are_compared_as_a_set():
    slots = buffer_slots(NAMES)
    theirs = np.array([1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 7, 8], np.float32)
    ours = np.array([3, 4, 1, 2, 0, 0, 0, 0, 0, 0, 7, 8], np.float32)
    np.testing.assert_array_equal(align_buffer_slots(ours, theirs, slots, 0.05), theirs)


def test_statements_are_paired_by_content_and_extra_rows_left_out():
    slots = buffer_slots(NAMES)
    theirs = np.array([[0] * 10 + [5, 1], [0] * 10 + [9, 2]], np.float32)
    ours = np.array([[0] * 10 + [9, 2], [0] * 10 + [1, 1], [0] * 10 + [5, 1]], np.float32)
    i, j, _ = match_statements(ours, theirs, slots, 0.05)
    assert dict(zip(j.tolist(), i.tolist())) == {0: 2, 1: 0}


def test_replayed_features_mostly_agree_with_ansor(dataset):
    report = check_replay(dataset, sample=1)
    for kind in ("llvm", "cuda"):
        t = report.by_target[kind]
        assert t.replayed == t.programs
        # statement counts agree where Ansor's lowering accepted the program, but for TE's
        # cross-thread reductions, whose temporary buffer Ansor reports as a row of its own
        assert t.count_match >= 0.9 * (t.replayed - t.ansor_rejected)
        agreement = t.group_agreement(report.feature_names)
        for group in ("vectorize", "unroll", "parallel", "gpu_threads"):
            assert agreement[group] >= 0.95, (kind, group, agreement)
    # where Ansor's own lowering rejects a GPU program, verify_gpu_code rejects the replay too
    assert report.by_target["cuda"].gpu_verdicts[False, True] == 0


def test_check_replay_command_prints_a_table_and_json(dataset, capsys):
    assert main(["check-replay", str(dataset), "--sample", "1", "--json", "--quiet"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert "agreement per group" in "\n".join(out)
    summary = json.loads(out[-1])
    assert set(summary["llvm"]["group_agreement"]) == set(GROUPS)


def _with_oracle_file(dataset, tmp_path, damage) -> tuple:
    """A copy of ``dataset`` with one record file and its oracle file, the latter changed by ``damage``."""
    copy = tmp_path / "ds"
    (copy / "oracle").mkdir(parents=True)
    (copy / "network_info").symlink_to(dataset / "network_info")
    record = sorted((dataset / "measure_records").rglob("*.json"))[0]
    rel = record.relative_to(dataset)
    (copy / rel).parent.mkdir(parents=True)
    (copy / rel).symlink_to(record)
    (copy / "oracle" / "index.json").write_bytes((dataset / "oracle" / "index.json").read_bytes())
    npz = copy / "oracle" / rel.with_suffix(".npz")
    npz.parent.mkdir(parents=True)
    with np.load(dataset / "oracle" / rel.with_suffix(".npz")) as z:
        arrays = {k: z[k] for k in z.files}
    damage(npz, arrays)
    return copy, npz


def _save(changes):
    def damage(npz, arrays):
        with open(npz, "wb") as f:
            np.savez(f, **{**arrays, **changes(arrays)})
    return damage


@pytest.mark.parametrize("damage, said", [
    (lambda npz, a: npz.write_bytes(b"PK\x03\x04 not a zip"), "unreadable oracle file"),
    (_save(lambda a: {"features": np.array([object()] * 3, dtype=object)}), "unreadable oracle file"),
    (_save(lambda a: {"offsets": a["offsets"][:-2]}), "oracle arrays do not fit together"),
    (_save(lambda a: {"features": np.full_like(a["features"], np.nan)}), "oracle arrays do not fit together or are not finite"),
    (_save(lambda a: {"features": a["features"].astype(str)}), "oracle arrays do not fit together"),
])
def test_a_damaged_oracle_file_is_named_not_a_crash(dataset, tmp_path, capsys, damage, said):
    copy, npz = _with_oracle_file(dataset, tmp_path, damage)
    assert main(["check-replay", str(copy), "--sample", "1", "--quiet"]) == 2
    assert f"{npz}: {said}" in capsys.readouterr().err


def test_a_damaged_oracle_index_is_named(dataset, tmp_path, capsys):
    copy, _ = _with_oracle_file(dataset, tmp_path, lambda npz, a: np.savez(npz, **a))
    (copy / "oracle" / "index.json").write_text("{feature_names: 1}")
    assert main(["check-replay", str(copy), "--sample", "1", "--quiet"]) == 2
    assert f"{copy / 'oracle' / 'index.json'}: not an oracle index" in capsys.readouterr().err
