"""inspect's cache entries for frozen modules (tuning/frozen_frames.py): the frames of the import
machinery are found without a scan of sys.modules, and inspect reports them as before."""

import importlib
import inspect
import sys

import pytest

from pruner_offline.tuning.frozen_frames import register_frozen_frames

FROZEN = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


def _import_stack(tmp_path, name: str) -> list[inspect.FrameInfo]:
    """inspect.stack() as a TVMScript decorator takes it: while a module is being imported."""
    (tmp_path / f"{name}.py").write_text("import inspect\nSTACK = inspect.stack()\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.invalidate_caches()
        return importlib.import_module(name).STACK
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def _told(stack: list[inspect.FrameInfo]) -> list[tuple]:
    return [(f.filename, f.lineno, f.function, f.code_context, f.index) for f in stack]


@pytest.fixture
def without_entries(monkeypatch):
    kept = {k: v for k, v in inspect.modulesbyfile.items() if not k.startswith("<frozen ")}
    monkeypatch.setattr(inspect, "modulesbyfile", kept)


def test_frames_of_an_import_are_found_in_the_cache(tmp_path, monkeypatch, without_entries):
    scanned = []  # getmodule computes an absolute file name only where its cache missed
    real = inspect.getabsfile
    monkeypatch.setattr(inspect, "getabsfile",
                        lambda obj, _filename=None: scanned.append(_filename) or real(obj, _filename))

    before = _import_stack(tmp_path, "stack_before")
    assert {f.filename for f in before} & set(FROZEN), "the import machinery was not on the stack"
    assert set(scanned) & set(FROZEN), "without the entries, inspect misses its cache on those frames"

    register_frozen_frames()
    register_frozen_frames()  # idempotent
    scanned.clear()
    after = _import_stack(tmp_path, "stack_after")
    assert not [f for f in scanned if f and f.startswith("<frozen ")]
    assert {inspect.modulesbyfile[f] for f in FROZEN} == {"importlib._bootstrap", "importlib._bootstrap_external"}

    # the import machinery's frames, told the same way (the callers differ in their lines)
    assert len(after) == len(before)
    assert [t for t in _told(after) if t[0] in FROZEN] == [t for t in _told(before) if t[0] in FROZEN]
    assert all(f.code_context is None for f in after if f.filename in FROZEN)


def test_importing_the_tuning_package_registers_them():
    import pruner_offline.tuning  # noqa: F401

    assert all(f in inspect.modulesbyfile for f in FROZEN)
