"""Making training data for a device: programs sampled from each task's MetaSchedule design space
and measured there, into a MetaSchedule database that every other stage reads.

Modules: settings (what a collection is; no TVM import), tasks (the kernels of a network, a module
or a built-in workload), sampler (TenSet's mix of random programs and programs of an evolutionary
search driven by a random cost model, deduplicated by structure), manifest (the settings, machine
and runs stored with the data), run (the resumable driver and its report), merge (shards of one
collection into one database, checked).
"""
