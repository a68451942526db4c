"""Features of scheduled TIR: per-statement rows (164 per-store + 10 op tag), the 8x23 dataflow
pattern, 11 PSA symbols per statement and the analytic draft score."""

from .devices import DEVICES, DeviceConstants, get_device
from .featurize import DraftFeatures, FeatureAlignmentError, ProgramFeatures, featurize_prim_func, psa_only
from .schema import (DATAFLOW_COLUMNS, DATAFLOW_TOKENS, FEATURE_SCHEMA_VERSION, OP_TAGS,
                     STATEMENT_COLUMNS, SYMBOL_COLUMNS)

__all__ = [
    "DATAFLOW_COLUMNS", "DATAFLOW_TOKENS", "DEVICES", "FEATURE_SCHEMA_VERSION", "OP_TAGS",
    "STATEMENT_COLUMNS", "SYMBOL_COLUMNS", "DeviceConstants", "DraftFeatures", "FeatureAlignmentError",
    "ProgramFeatures", "featurize_prim_func", "get_device", "psa_only",
]
