// tir_walk.walk of scheduled PrimFuncs read in C++, a batch in one call, with native_reflect.cc's
// readers. Expressions are walked with tvm-ffi's own structural walk, the engine that
// tvm_ffi.structural_walk runs for the Python walk, so both see the same nodes in the same order.
// native_walk.py documents what is returned and rebuilds the walk's named tuples from it;
// tir_walk.walk is the reference, and a change there is one here.

namespace {

using tvm::ffi::AnyView;

using Keys = std::vector<int64_t>;  // loop variables' identities, sorted, each once

void Unite(Keys* into, const Keys& from) {
  if (from.empty()) return;
  Keys merged;
  std::set_union(into->begin(), into->end(), from.begin(), from.end(), std::back_inserter(merged));
  into->swap(merged);
}

int64_t Identity(const Object* node) { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(node)); }

bool IsAny(const Object* node, const std::vector<int32_t>& types) {
  for (int32_t type : types) {
    if (IsInstance(node, type)) return true;
  }
  return false;
}

// Calls fn(node) on every object under root, children first, as tvm_ffi.structural_walk does.
template <typename Fn>
void WalkObjects(AnyView root, Fn fn) {
  tvm::ffi::StructuralWalk<tvm::ffi::WalkOrder::kPostOrder>(
      root, [&](AnyView value) -> tvm::ffi::WalkResult {
        if (const Object* node = value.as<Object>()) fn(node);
        return tvm::ffi::WalkResult::Advance();
      });
}

struct Access {
  int64_t buffer;  // index into the program's buffers
  Keys keys;
};

struct Statement {
  int64_t block_name;  // string index
  bool has_reduce;
  std::vector<int64_t> loops;  // indices into the program's loops, outermost first
  Access write;
  std::vector<std::pair<String, Access>> reads;  // by buffer name, first load first
  int64_t float_ops = 0, other_float_ops = 0, guard_ops = 0;
};

class Walker {
 public:
  Walker(TirFields& f, int64_t comm_reduce, const Object* fma, const Object* if_then_else_op)
      : f_(f), comm_reduce_(comm_reduce), fma_(fma), if_then_else_(if_then_else_op) {
    blocks_.push_back({Text(String("")), false});
  }

  void Visit(const Object* stmt) { VisitStmt(f_, stmt, this); }

  // [loops: key, extent, kind, thread tag; buffers: name, scope, element bytes, elements;
  //  statements: constant store?, block name, reduction?, float ops, other float ops, guard ops,
  //  loops, write (buffer, keys), reads (buffer, keys)...], each list after its length; strings
  //  are indices into strings().
  void Encode(std::vector<int64_t>* out) const {
    out->push_back(static_cast<int64_t>(loops_.size() / 4));
    out->insert(out->end(), loops_.begin(), loops_.end());
    out->push_back(static_cast<int64_t>(buffers_.size() / 4));
    out->insert(out->end(), buffers_.begin(), buffers_.end());
    out->push_back(static_cast<int64_t>(rows_.size() + inits_.size()));
    for (const Statement& s : rows_) Encode(s, false, out);
    for (const Statement& s : inits_) Encode(s, true, out);
  }

  const std::vector<String>& strings() const { return strings_; }

 private:
  template <typename Walker>
  friend void VisitStmt(TirFields& f, const Object* stmt, Walker* walker);

  void VisitFor(const Object* stmt) {
    const Object* var = Required(stmt, f_.loop_var);
    int64_t key = Identity(var);
    var_loops_[var] = Keys{key};
    const Object* binding = Node(stmt, f_.thread_binding);
    int64_t tag = binding == nullptr ? -1 : Text(Get(binding, f_.thread_tag).cast<String>());
    const Object* extent = Node(stmt, f_.extent);
    int64_t length =
        extent != nullptr && IsInstance(extent, f_.int_imm) ? Get(extent, f_.int_value).cast<int64_t>() : 1;
    stack_.push_back(static_cast<int64_t>(loops_.size() / 4));
    loops_.insert(loops_.end(), {key, length, Get(stmt, f_.kind).cast<int64_t>(), tag});
    Visit(Required(stmt, f_.for_body));
    stack_.pop_back();
  }

  void VisitBind(const Object* stmt) { var_loops_[Required(stmt, f_.bind_var)] = KeysOf(Get(stmt, f_.bind_value)); }

  static void Encode(const Access& a, std::vector<int64_t>* out) {
    out->push_back(a.buffer);
    out->push_back(static_cast<int64_t>(a.keys.size()));
    out->insert(out->end(), a.keys.begin(), a.keys.end());
  }

  static void Encode(const Statement& s, bool constant, std::vector<int64_t>* out) {
    out->insert(out->end(), {constant ? 1 : 0, s.block_name, s.has_reduce ? 1 : 0, s.float_ops,
                             s.other_float_ops, s.guard_ops, static_cast<int64_t>(s.loops.size())});
    out->insert(out->end(), s.loops.begin(), s.loops.end());
    Encode(s.write, out);
    out->push_back(static_cast<int64_t>(s.reads.size()));
    for (const auto& read : s.reads) Encode(read.second, out);
  }

  int64_t Text(const String& text) {
    std::string key(text.data(), text.size());
    auto found = text_index_.find(key);
    if (found != text_index_.end()) return found->second;
    int64_t index = static_cast<int64_t>(strings_.size());
    strings_.push_back(text);
    text_index_.emplace(std::move(key), index);
    return index;
  }

  Keys KeysOf(AnyView expr) {
    if (const Object* node = expr.as<Object>(); node != nullptr && IsInstance(node, f_.var)) {
      auto found = var_loops_.find(node);
      return found == var_loops_.end() ? Keys() : found->second;
    }
    Keys keys;
    WalkObjects(expr, [&](const Object* node) {
      if (IsInstance(node, f_.var)) Unite(&keys, LoopsOf(node));
    });
    return keys;
  }

  const Keys& LoopsOf(const Object* var) const {
    static const Keys none;
    auto found = var_loops_.find(var);
    return found == var_loops_.end() ? none : found->second;
  }

  void VisitBlock(const Object* realize) {
    const Object* block = Required(realize, f_.realize_block);
    bool has_reduce = false;
    ForEachBinding(f_, realize, [&](const Object* iv, const Any& value) {
      var_loops_[Required(iv, f_.iv_var)] = KeysOf(value);
      has_reduce |= Get(iv, f_.iter_type).cast<int64_t>() == comm_reduce_;
    });
    String name = Get(block, f_.name_hint).cast<String>();
    blocks_.push_back({name.size() ? Text(name) : blocks_.back().first, has_reduce});
    Visit(Node(block, f_.init));
    Visit(Required(block, f_.block_body));
    blocks_.pop_back();
  }

  bool IsFloat(const Object* expr) {
    const Object* type = Node(expr, f_.expr_ty);
    if (type == nullptr || !IsInstance(type, f_.prim_type)) return false;
    DLDataType dtype = Get(type, f_.prim_dtype).cast<DLDataType>();
    uint64_t key = dtype.code | (static_cast<uint64_t>(dtype.bits) << 8) | (static_cast<uint64_t>(dtype.lanes) << 16);
    auto found = float_dtypes_.find(key);
    if (found != float_dtypes_.end()) return found->second;
    String text = tvm::ffi::DLDataTypeToString(dtype);
    bool is_float = text.size() >= 5 && std::memcmp(text.data(), "float", 5) == 0;
    float_dtypes_.emplace(key, is_float);
    return is_float;
  }

  void VisitStore(const Object* store) {
    Statement s;
    std::vector<std::pair<Any, Keys>> loads;
    Keys pending;
    std::vector<Any> guards;
    WalkObjects(Get(store, f_.store_value), [&](const Object* node) {
      if (IsInstance(node, f_.var)) {
        Unite(&pending, LoopsOf(node));
      } else if (IsInstance(node, f_.tensor_load)) {
        loads.emplace_back(Get(node, f_.load_source), std::move(pending));
        pending.clear();
      } else if (IsAny(node, f_.arith)) {
        s.float_ops += IsFloat(node);
      } else if (IsAny(node, f_.other)) {
        s.other_float_ops += IsFloat(node);
      } else if (IsInstance(node, f_.call)) {
        const Object* op = Node(node, f_.call_op);
        if (op == fma_) {
          ++s.float_ops;
        } else if (op == if_then_else_) {
          Any args = Get(node, f_.call_args);
          const ArrayObj* list = args.as<ArrayObj>();
          TVM_FFI_ICHECK(list != nullptr && list->size() > 0) << "an if_then_else without its condition";
          guards.push_back((*list)[0]);
        } else if (IsFloat(node)) {
          ++s.other_float_ops;
        }
      }
    });
    Any written = Get(store, f_.store_buffer);
    s.write = Access{BufferIndex(written), KeysOf(Get(store, f_.store_indices))};
    for (auto& [buffer, keys] : loads) {
      String name = Get(RequiredItem(buffer), f_.var_name).cast<String>();
      auto read = std::find_if(s.reads.begin(), s.reads.end(), [&](const auto& r) { return r.first == name; });
      if (read == s.reads.end()) {
        s.reads.emplace_back(name, Access{BufferIndex(buffer), std::move(keys)});
      } else {  // the buffer of the latest load of that name, the loops of all of them
        read->second.buffer = BufferIndex(buffer);
        Unite(&read->second.keys, keys);
      }
    }
    for (const Any& cond : guards) {
      WalkObjects(cond, [&](const Object* node) { s.guard_ops += IsAny(node, f_.tests); });
    }
    s.block_name = blocks_.back().first;
    s.has_reduce = blocks_.back().second;
    s.loops = stack_;
    const Object* value = Node(store, f_.store_value);
    if (value != nullptr && (IsInstance(value, f_.int_imm) || IsInstance(value, f_.float_imm))) {
      inits_.push_back(std::move(s));
      return;
    }
    auto [row, fresh] = row_of_.emplace(written.as<Object>(), rows_.size());
    if (fresh) {
      rows_.push_back(std::move(s));
    } else {  // the buffer keeps the place of its first store and is described by its last
      rows_[row->second] = std::move(s);
    }
  }

  int64_t BufferIndex(const Any& handle) {
    const Object* buffer = RequiredItem(handle);
    auto found = buffer_index_.find(buffer);
    if (found != buffer_index_.end()) return found->second;
    BufferDecl decl = ReadBuffer(f_, buffer);
    DLDataType dtype = decl.dtype;
    int64_t elements = 1;
    for (int64_t dim : decl.shape) elements *= dim > 0 ? dim : 1;
    String scope = f_.storage_scope(handle).cast<String>();
    int64_t index = static_cast<int64_t>(buffer_index_.size());
    buffers_.insert(buffers_.end(), {Text(Get(buffer, f_.var_name).cast<String>()), Text(scope),
                                     std::max<int64_t>(1, dtype.bits / 8), elements});
    buffer_index_.emplace(buffer, index);
    return index;
  }

  TirFields& f_;
  int64_t comm_reduce_;
  const Object *fma_, *if_then_else_;
  std::unordered_map<const Object*, Keys> var_loops_;
  std::vector<std::pair<int64_t, bool>> blocks_;  // name (string index), has a reduction axis
  std::vector<int64_t> loops_;                    // 4 per loop, in visit order
  std::vector<int64_t> stack_;                    // the loops around the statement visited
  std::vector<int64_t> buffers_;                  // 4 per buffer
  std::unordered_map<const Object*, int64_t> buffer_index_;
  std::vector<Statement> rows_, inits_;
  std::unordered_map<const Object*, size_t> row_of_;
  std::vector<String> strings_;
  std::unordered_map<std::string, int64_t> text_index_;
  std::unordered_map<uint64_t, bool> float_dtypes_;
};

}  // namespace

// funcs: PrimFuncs; comm_reduce: IterVar's reduction kind; fma and if_then_else: the two ops
// tir_walk tells apart. Returns [integers
// (Walker::Encode of each program, joined), their ends, strings (joined), their ends, indices of
// the programs that could not be read].
Array<Any> tir_walks(const Array<Any>& funcs, int64_t comm_reduce, const Any& fma, const Any& if_then_else) {
  TirFields& fields = Fields();
  std::vector<int64_t> ints, int_ends, string_ends, failed;
  Array<Any> strings;
  for (size_t i = 0; i < funcs.size(); ++i) {
    Walker walker(fields, comm_reduce, fma.as<Object>(), if_then_else.as<Object>());
    std::vector<int64_t> encoded;
    try {
      const Object* func = funcs[i].as<Object>();
      TVM_FFI_ICHECK(func != nullptr && IsInstance(func, fields.prim_func)) << "not a PrimFunc";
      walker.Visit(Node(func, fields.func_body));
      walker.Encode(&encoded);
      for (const String& text : walker.strings()) strings.push_back(text);
    } catch (const std::exception&) {
      failed.push_back(static_cast<int64_t>(i));
      encoded.clear();
    }
    ints.insert(ints.end(), encoded.begin(), encoded.end());
    int_ends.push_back(static_cast<int64_t>(ints.size()));
    string_ends.push_back(static_cast<int64_t>(strings.size()));
  }
  return Array<Any>{Shape(std::move(ints)), Shape(std::move(int_ends)), strings,
                    Shape(std::move(string_ends)), Shape(std::move(failed))};
}
