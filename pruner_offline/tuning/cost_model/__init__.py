"""The cost models a tuning run asks: ours (pruner.py: a MetaSchedule PyCostModel, the draft
model ranks every candidate and PaCM verifies the best) and the parts it is built of; timed.py
wraps any MetaSchedule CostModel to count the seconds spent in it."""
