"""Building and timing programs, for tuning runs and for making datasets: one layer for both.

Modules: settings (what a measurement is: repeats, timeouts, where it runs; no TVM import), builder
(a pooled MetaSchedule builder that skips the tensor-intrinsics import), runner (a MetaSchedule
runner on this machine or on a remote device through TVM's RPC tracker, whose every run is bounded
in time and whose crashed or hung worker is replaced), batch (a batch of programs built and run
together), outcome (why a program failed, in a few words), measurers (the builder and runner of
one run, checked before any work).

Nothing is re-exported: build and run workers import these modules by reference and must not pay
for torch or the models.
"""
