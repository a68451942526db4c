"""Feature schema: the version stamp and the name of every column the featurizer emits.

Bump FEATURE_SCHEMA_VERSION whenever a column's meaning, order or scaling changes; checkpoints and
feature stores compare it and refuse features of another schema.
"""

FEATURE_SCHEMA_VERSION = 3
# Schemas whose features this version can still extract (the per-store columns by MetaSchedule's
# PerStoreFeature in 2, by the package's own extractor in 3), so that models of either tune.
EXTRACTABLE_SCHEMAS = (2, 3)


def extractable_schemas() -> tuple[str, ...]:
    """EXTRACTABLE_SCHEMAS as model files and stores record a schema (text)."""
    return tuple(str(s) for s in EXTRACTABLE_SCHEMAS)

BUFFERS_PER_STORE = 5
ARITH_INTENSITY_SAMPLES = 10


def _per_store_columns() -> tuple[str, ...]:
    # Mirrors the export order of MetaSchedule's PerStoreFeature (groups 1-5), so a column index
    # here is the index into the extractor's output row.
    arith = [
        f"{kind}_{op}"
        for kind in ("float", "int")
        for op in ("mad", "add_sub", "mul", "div_mod", "cmp", "math_func", "other_func")
    ] + ["bool_op", "select_op"]
    positions = ["none", "inner_spatial", "middle_spatial", "outer_spatial",
                 "inner_reduce", "middle_reduce", "outer_reduce", "mixed"]
    kinds = [
        f"{ann}_{field}"
        for ann in ("vec", "unroll", "parallel")
        for field in ["num", "prod", "len"] + [f"pos_{p}" for p in positions]
    ]
    gpu = ["is_gpu", "blockIdx_x_len", "blockIdx_y_len", "blockIdx_z_len",
           "threadIdx_x_len", "threadIdx_y_len", "threadIdx_z_len", "vthread_len"]
    buffers = [f"buf{i}_{name}" for i in range(BUFFERS_PER_STORE) for name in BUFFER_ACCESS_COLUMNS]
    curve = [f"arith_intensity_{i}" for i in range(ARITH_INTENSITY_SAMPLES)]
    alloc = ["alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod"]
    outer = ["outer_prod", "num_loops", "auto_unroll_max_step"]
    return tuple(arith + kinds + gpu + buffers + curve + alloc + outer)


# One buffer-access group of the per-store features; the dataflow vectors reuse it verbatim.
BUFFER_ACCESS_COLUMNS = (
    "acc_read", "acc_write", "acc_readwrite",
    "bytes", "unique_bytes", "lines", "unique_lines",
    "reuse_loop_multiple_read", "reuse_serial_multiple_read_write", "reuse_none",
    "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct",
    "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct", "unique_lines_d_reuse_ct",
    "stride",
)

OP_TAGS = ("conv", "matmul", "depthwise", "pool", "elementwise", "reduction",
           "injective", "cache_copy", "winograd", "other")

PER_STORE_COLUMNS = _per_store_columns()
STATEMENT_COLUMNS = PER_STORE_COLUMNS + tuple(f"op_{t}" for t in OP_TAGS)

# Offsets into a per-store row.
BUFFER_GROUP_START = 57
ALLOC_SIZE_COLUMN = PER_STORE_COLUMNS.index("alloc_size")

DATAFLOW_TOKENS = (
    "init_local_write",
    "copy0_global_read", "copy0_shared_write",
    "copy1_global_read", "copy1_shared_write",
    "compute_shared_read0", "compute_shared_read1",
    "compute_local_readwrite",
)
MEMORY_LEVELS = ("global", "shared", "local")
DATAFLOW_COLUMNS = (
    ("float_ops",) + tuple(f"level_{m}" for m in MEMORY_LEVELS) + BUFFER_ACCESS_COLUMNS + ("alloc_size",)
)

SYMBOL_COLUMNS = ("F_t", "F", "RegUsage", "MemWorkload", "SharedMemFootprint", "DRAM_workload",
                  "DataReusePenalty", "is_gpu", "grid", "block", "vthread")

assert len(PER_STORE_COLUMNS) == 164
assert PER_STORE_COLUMNS[BUFFER_GROUP_START] == "buf0_acc_read"
assert len(STATEMENT_COLUMNS) == 174
assert len(DATAFLOW_COLUMNS) == 23
assert len(SYMBOL_COLUMNS) == 11
