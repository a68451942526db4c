"""Tuning runs: the one driver over a list of tasks (tasks.py), for one workload (workload.py) and for
a whole network (network.py); what earlier runs left in a work directory (resume.py); logs."""
