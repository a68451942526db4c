"""MetaSchedule measure callbacks (PyMeasureCallback) that record a run as it goes."""
