"""The HDF5 feature store: per-record features, labels and provenance of a featurized dataset."""
