"""Features of scheduled TIR: per-statement rows (164 per-store + 10 op tag), the 8x23 dataflow
pattern, 11 PSA symbols per statement and the analytic draft score.

Only the TVM-free parts (schema, device constants) are re-exported here, so that training and
evaluation from a store run where TVM is not installed; extraction is ``features.extract``.
"""

from ..devices import DEFAULT_DEVICE, DEVICES, DeviceConstants, get_device
from .schema import (DATAFLOW_COLUMNS, DATAFLOW_TOKENS, EXTRACTABLE_SCHEMAS, FEATURE_SCHEMA_VERSION, OP_TAGS,
                     STATEMENT_COLUMNS, SYMBOL_COLUMNS)

__all__ = [
    "DATAFLOW_COLUMNS", "DATAFLOW_TOKENS", "DEFAULT_DEVICE", "DEVICES", "EXTRACTABLE_SCHEMAS", "FEATURE_SCHEMA_VERSION",
    "OP_TAGS",
    "STATEMENT_COLUMNS", "SYMBOL_COLUMNS", "DeviceConstants", "get_device",
]
