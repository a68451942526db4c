"""Our cost models inside MetaSchedule tuning runs (draft-then-verify), and the `tune` driver,
grouped by MetaSchedule's own concepts:

- cost_model/: PrunerCostModel (a PyCostModel: the draft ranks, PaCM verifies) and its parts
  (candidate features, ranking, calibration, in-task trees, online training), TimedCostModel;
- search/: DraftThenVerifySearch (a PySearchStrategy), spreading over loop structures, random
  design-space samples;
- measure_callback/: what a run records after each measured batch (PyMeasureCallbacks);
- frontends/: what to tune: built-in TE workloads and TIR files, torch.export and ONNX networks;
- run/: the one driver over a list of tasks (tasks.py), one workload (workload.py), a whole network
  (network.py), resuming a work directory, logs.

The builder and runner are pruner_offline.measure's, shared with collect. context.py builds a
TuneContext without importing TVM's tensor intrinsics; frozen_frames.py makes that import fast
where something else triggers it.
"""

from .frozen_frames import register_frozen_frames

register_frozen_frames()
