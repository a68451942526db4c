"""Search strategies: draft-then-verify inside MetaSchedule's evolutionary search (draft_verify.py,
a PySearchStrategy), spreading what is measured over loop structures (spread.py), and random
programs of a design space for benches and tests (sampling.py)."""
