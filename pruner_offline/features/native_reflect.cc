// What the package's C++ readers of TIR (native_skeleton.cc, native_walk.cc) share; native.py
// compiles the three files as one source. The TVM wheel ships tvm-ffi's headers but not TIR's, so
// nodes are read the way Python reads them: through the reflection table, each field's getter
// found once by type key and name.

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/extra/structural_visit.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/accessor.h>
#include <tvm/ffi/string.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using tvm::ffi::Any;
using tvm::ffi::Array;
using tvm::ffi::ArrayObj;
using tvm::ffi::Bytes;
using tvm::ffi::Function;
using tvm::ffi::Object;
using tvm::ffi::Shape;
using tvm::ffi::String;

int32_t TypeIndexOf(const char* type_key) {
  TVMFFIByteArray key{type_key, std::strlen(type_key)};
  int32_t index;
  TVM_FFI_CHECK_SAFE_CALL(TVMFFITypeKeyToIndex(&key, &index));
  return index;
}

// The field of that name of the type or of one of its ancestors; nullptr if there is none.
const TVMFFIFieldInfo* FindField(int32_t type_index, const char* name) {
  const TVMFFIFieldInfo* found = nullptr;
  size_t length = std::strlen(name);
  tvm::ffi::reflection::ForEachFieldInfoWithEarlyStop(
      TVMFFIGetTypeInfo(type_index), [&](const TVMFFIFieldInfo* field) {
        if (field->name.size == length && std::memcmp(field->name.data, name, length) == 0) {
          found = field;
        }
        return found != nullptr;
      });
  return found;
}

const TVMFFIFieldInfo* Field(const char* type_key, const char* name) {
  const TVMFFIFieldInfo* field = FindField(TypeIndexOf(type_key), name);
  TVM_FFI_ICHECK(field != nullptr) << type_key << " has no field " << name;
  return field;
}

// Python's isinstance: the type itself or a type derived from it.
bool IsInstance(const Object* node, int32_t type_index) {
  int32_t own = node->type_index();
  if (own == type_index) return true;
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(own);
  const TVMFFITypeInfo* target = TVMFFIGetTypeInfo(type_index);
  return info->type_depth > target->type_depth &&
         info->type_ancestors[target->type_depth]->type_index == type_index;
}

Any Get(const Object* node, const TVMFFIFieldInfo* field) {
  Any value;
  void* address = const_cast<char*>(reinterpret_cast<const char*>(node)) + field->offset;
  TVM_FFI_CHECK_SAFE_CALL(field->getter(address, reinterpret_cast<TVMFFIAny*>(&value)));
  return value;
}

// An object field's node (nullptr for None), borrowed: its owner keeps it alive for the whole walk.
const Object* Node(const Object* node, const TVMFFIFieldInfo* field) {
  return Get(node, field).as<Object>();
}

// The same where the walk reads the node's fields: an error (the program is skipped, as Python's
// AttributeError on None skips it) where a malformed program has none.
const Object* Required(const Object* node, const TVMFFIFieldInfo* field) {
  const Object* value = Node(node, field);
  TVM_FFI_ICHECK(value != nullptr) << "a missing " << std::string(field->name.data, field->name.size);
  return value;
}

// An element of an Array (a statement, an iterator, a buffer) as a node: an error where it is none.
const Object* RequiredItem(const Any& item) {
  const Object* node = item.as<Object>();
  TVM_FFI_ICHECK(node != nullptr) << "a missing node";
  return node;
}

// A field found by name in whatever type holds it, looked up once per type (the statements the
// walk passes through by their body: AttrStmt, DeclBuffer, While...; the buffers whose names it reads).
class FieldByName {
 public:
  explicit FieldByName(const char* name) : name_(name) {}

  const TVMFFIFieldInfo* Of(int32_t type_index) {
    if (static_cast<size_t>(type_index) >= known_.size()) {
      fields_.resize(type_index + 1, nullptr);
      known_.resize(type_index + 1, false);
    }
    if (!known_[type_index]) {
      fields_[type_index] = FindField(type_index, name_);
      known_[type_index] = true;
    }
    return fields_[type_index];
  }

 private:
  const char* name_;
  std::vector<const TVMFFIFieldInfo*> fields_;
  std::vector<bool> known_;
};

// The TIR node types and fields the readers use, found once per thread.
struct TirFields {
  int32_t prim_func, seq_stmt, for_, block_realize, block, buffer_store, if_then_else, bind, int_imm,
      float_imm, var, tensor_load, call, prim_type, op, add, sub, mul, div, mod, floordiv, floormod, min, max,
      cast, select, ramp, broadcast, and_, or_, not_;
  std::vector<int32_t> arith, other, tests, compares;
  const TVMFFIFieldInfo *func_body, *seq, *loop_var, *extent, *kind, *for_body, *thread_binding,
      *thread_tag, *realize_block, *iter_values, *iter_vars, *iv_var, *iter_type, *name_hint, *init,
      *block_body, *store_buffer, *store_value, *store_indices, *then_case, *else_case, *bind_var,
      *bind_value, *int_value, *var_name, *load_source, *call_op, *call_args, *expr_ty, *prim_dtype,
      *buffer_dtype, *buffer_shape, *loop_min, *loop_annotations, *alloc_buffers, *cast_value,
      *select_true, *select_false, *ramp_base, *ramp_stride, *ramp_lanes, *broadcast_value, *load_indices,
      *op_name;
  FieldByName body{"body"}, name{"name"}, bin_a{"a"}, bin_b{"b"};
  Function storage_scope, op_get_attr;

  TirFields()
      : prim_func(TypeIndexOf("tirx.PrimFunc")),
        seq_stmt(TypeIndexOf("tirx.SeqStmt")),
        for_(TypeIndexOf("tirx.For")),
        block_realize(TypeIndexOf("s_tir.SBlockRealize")),
        block(TypeIndexOf("s_tir.SBlock")),
        buffer_store(TypeIndexOf("tirx.BufferStore")),
        if_then_else(TypeIndexOf("tirx.IfThenElse")),
        bind(TypeIndexOf("tirx.Bind")),
        int_imm(TypeIndexOf("ir.IntImm")),
        float_imm(TypeIndexOf("ir.FloatImm")),
        var(TypeIndexOf("ir.Var")),
        tensor_load(TypeIndexOf("ir.TensorLoad")),
        call(TypeIndexOf("ir.Call")),
        prim_type(TypeIndexOf("ir.PrimType")),
        op(TypeIndexOf("ir.Op")),
        add(TypeIndexOf("prim.Add")),
        sub(TypeIndexOf("prim.Sub")),
        mul(TypeIndexOf("prim.Mul")),
        div(TypeIndexOf("prim.Div")),
        mod(TypeIndexOf("prim.Mod")),
        floordiv(TypeIndexOf("prim.FloorDiv")),
        floormod(TypeIndexOf("prim.FloorMod")),
        min(TypeIndexOf("prim.Min")),
        max(TypeIndexOf("prim.Max")),
        cast(TypeIndexOf("prim.Cast")),
        select(TypeIndexOf("prim.Select")),
        ramp(TypeIndexOf("prim.Ramp")),
        broadcast(TypeIndexOf("prim.Broadcast")),
        and_(TypeIndexOf("prim.And")),
        or_(TypeIndexOf("prim.Or")),
        not_(TypeIndexOf("prim.Not")),
        func_body(Field("tirx.PrimFunc", "body")),
        seq(Field("tirx.SeqStmt", "seq")),
        loop_var(Field("tirx.For", "loop_var")),
        extent(Field("tirx.For", "extent")),
        kind(Field("tirx.For", "kind")),
        for_body(Field("tirx.For", "body")),
        thread_binding(Field("tirx.For", "thread_binding")),
        thread_tag(Field("tirx.IterVar", "thread_tag")),
        realize_block(Field("s_tir.SBlockRealize", "block")),
        iter_values(Field("s_tir.SBlockRealize", "iter_values")),
        iter_vars(Field("s_tir.SBlock", "iter_vars")),
        iv_var(Field("tirx.IterVar", "var")),
        iter_type(Field("tirx.IterVar", "iter_type")),
        name_hint(Field("s_tir.SBlock", "name_hint")),
        init(Field("s_tir.SBlock", "init")),
        block_body(Field("s_tir.SBlock", "body")),
        store_buffer(Field("tirx.BufferStore", "buffer")),
        store_value(Field("tirx.BufferStore", "value")),
        store_indices(Field("tirx.BufferStore", "indices")),
        then_case(Field("tirx.IfThenElse", "then_case")),
        else_case(Field("tirx.IfThenElse", "else_case")),
        bind_var(Field("tirx.Bind", "var")),
        bind_value(Field("tirx.Bind", "value")),
        int_value(Field("ir.IntImm", "value")),
        var_name(Field("ir.Var", "name")),
        load_source(Field("ir.TensorLoad", "source")),
        call_op(Field("ir.Call", "op")),
        call_args(Field("ir.Call", "args")),
        expr_ty(Field("ir.Expr", "ty")),
        prim_dtype(Field("ir.PrimType", "dtype")),
        buffer_dtype(Field("tirx.BufferType", "dtype")),
        buffer_shape(Field("tirx.BufferType", "shape")),
        loop_min(Field("tirx.For", "min")),
        loop_annotations(Field("tirx.For", "annotations")),
        alloc_buffers(Field("s_tir.SBlock", "alloc_buffers")),
        cast_value(Field("prim.Cast", "value")),
        select_true(Field("prim.Select", "true_value")),
        select_false(Field("prim.Select", "false_value")),
        ramp_base(Field("prim.Ramp", "base")),
        ramp_stride(Field("prim.Ramp", "stride")),
        ramp_lanes(Field("prim.Ramp", "lanes")),
        broadcast_value(Field("prim.Broadcast", "value")),
        load_indices(Field("ir.TensorLoad", "indices")),
        op_name(Field("ir.Op", "name")) {
    for (const char* key : {"prim.Add", "prim.Sub", "prim.Mul", "prim.Div", "prim.Mod", "prim.FloorDiv",
                            "prim.FloorMod"}) {
      arith.push_back(TypeIndexOf(key));
    }
    for (const char* key : {"prim.Max", "prim.Min"}) other.push_back(TypeIndexOf(key));
    for (const char* key : {"prim.LT", "prim.LE", "prim.GT", "prim.GE", "prim.EQ", "prim.NE", "prim.And",
                            "prim.Or", "prim.Not"}) {
      tests.push_back(TypeIndexOf(key));
    }
    for (const char* key : {"prim.LT", "prim.LE", "prim.GT", "prim.GE", "prim.EQ", "prim.NE"}) {
      compares.push_back(TypeIndexOf(key));
    }
    auto scope = Function::GetGlobal("tirx.BufferStorageScope");
    TVM_FFI_ICHECK(scope.has_value()) << "no tirx.BufferStorageScope";
    storage_scope = *scope;
    auto get_attr = Function::GetGlobal("ir.OpGetAttr");
    TVM_FFI_ICHECK(get_attr.has_value()) << "no ir.OpGetAttr";
    op_get_attr = *get_attr;
  }
};

TirFields& Fields() {
  thread_local TirFields fields;  // its FieldByName caches grow as it meets new types
  return fields;
}

// A buffer's declared element type and shape (a dimension that is no constant reads 0).
struct BufferDecl {
  DLDataType dtype;
  std::vector<int64_t> shape;
};

BufferDecl ReadBuffer(TirFields& f, const Object* buffer) {
  const Object* type = Required(buffer, f.expr_ty);
  BufferDecl out{Get(Required(type, f.buffer_dtype), f.prim_dtype).cast<DLDataType>(), {}};
  Any shape = Get(type, f.buffer_shape);
  if (const ArrayObj* dims = shape.as<ArrayObj>()) {
    for (const Any& dim : *dims) {
      const Object* node = dim.as<Object>();
      out.shape.push_back(node != nullptr && IsInstance(node, f.int_imm) ? Get(node, f.int_value).cast<int64_t>() : 0);
    }
  }
  return out;
}

// A block realize's iterators and the values bound to them, pairwise: (iterator node, value).
template <typename Fn>
void ForEachBinding(TirFields& f, const Object* realize, Fn fn) {
  const Object* block = Required(realize, f.realize_block);
  Any iter_vars = Get(block, f.iter_vars), values = Get(realize, f.iter_values);
  const ArrayObj* ivs = iter_vars.as<ArrayObj>();
  const ArrayObj* bound = values.as<ArrayObj>();
  TVM_FFI_ICHECK(ivs != nullptr && bound != nullptr) << "a block without its iterators";
  for (size_t i = 0; i < std::min(ivs->size(), bound->size()); ++i) fn(RequiredItem((*ivs)[i]), (*bound)[i]);
}

// The statement walk both readers of whole programs share (native_walk.cc, native_per_store.cc):
// down statement lists, blocks, ifs and every statement with a body, calling the walker's
// VisitFor, VisitBlock (a block realize), VisitStore and VisitBind where it meets those.
template <typename Walker>
void VisitStmt(TirFields& f, const Object* stmt, Walker* walker) {
  if (stmt == nullptr) return;
  if (IsInstance(stmt, f.seq_stmt)) {
    Any seq = Get(stmt, f.seq);
    const ArrayObj* items = seq.as<ArrayObj>();
    TVM_FFI_ICHECK(items != nullptr) << "a statement list without its statements";
    for (const Any& item : *items) VisitStmt(f, RequiredItem(item), walker);
  } else if (IsInstance(stmt, f.for_)) {
    walker->VisitFor(stmt);
  } else if (IsInstance(stmt, f.block_realize)) {
    walker->VisitBlock(stmt);
  } else if (IsInstance(stmt, f.block)) {
    VisitStmt(f, Required(stmt, f.block_body), walker);
  } else if (IsInstance(stmt, f.buffer_store)) {
    walker->VisitStore(stmt);
  } else if (IsInstance(stmt, f.if_then_else)) {
    VisitStmt(f, Required(stmt, f.then_case), walker);
    VisitStmt(f, Node(stmt, f.else_case), walker);
  } else if (IsInstance(stmt, f.bind)) {
    walker->VisitBind(stmt);
  } else if (const TVMFFIFieldInfo* body = f.body.Of(stmt->type_index())) {
    VisitStmt(f, Required(stmt, body), walker);
  }
}

}  // namespace
