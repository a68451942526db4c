"""Our cost models inside MetaSchedule tuning runs (draft-then-verify), and the `tune` driver.

Modules: workloads (what to tune), context (TuneContext without the tensor-intrinsics import), candidates (feature cache), cost_model (draft-then-verify
PyCostModel), online (retraining on measured records), run (the tuning run and its report),
networks (whole torch networks: built-in ones, saved torch.export programs read safely),
onnx_network (whole networks from ONNX files, the onnx extra), network_run (a whole network's
kernels tuned with one shared cost model, compiled and timed), resume (what earlier runs left in a
work directory: a rerun continues them), frozen_frames (inspect's cache
entries that make importing TVMScript-decorated modules ~5x faster once torch is loaded:
MetaSchedule's own TuneContext first imports TVM's tensor intrinsics, which a user of the Python
API pays).

The builder and runner are pruner_offline.measure's, shared with collect.
"""

from .frozen_frames import register_frozen_frames

register_frozen_frames()
