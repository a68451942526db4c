// The per-store features (schema.PER_STORE_COLUMNS) of scheduled PrimFuncs, computed here from the
// TIR as the schedule leaves it, with native_reflect.cc's readers. MetaSchedule's PerStoreFeature
// first runs a dozen lowering passes over each program (two Simplify and CompactBufferAllocation
// are ~85% of them) to bring block bindings, regions and allocations into a form its bound
// analysis can read; that alone took as long per CPU record as Ansor's whole extraction. Here the
// indices are read as written: every index is compiled once into a linear form over the loops
// (block iterators and let-bound variables replaced by their bindings), whose non-linear parts
// (floordiv, floormod, min, max, products of loops) are bounded by interval arithmetic. A linear
// form does not depend on how the arithmetic was spelled, so a replayed TenSet program and a
// MetaSchedule candidate with the same loops give the same columns without a simplifier.
// docs/features.md §8 defines every column; per_store_native.py decodes the result.

namespace {

struct Interval {
  int64_t lo, hi;
};

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// A compiled index: constant + sum of coef * loop + sum of coef * opaque part.
struct Linear {
  int64_t constant = 0;
  std::vector<std::pair<int64_t, int64_t>> terms;   // (loop, coefficient), sorted by loop
  std::vector<std::pair<int64_t, int32_t>> opaque;  // (coefficient, index into Program::parts)
  bool IsConstant() const { return terms.empty() && opaque.empty(); }
};

enum class PartKind : uint8_t { kDiv, kMod, kMin, kMax, kMul, kEither, kRamp };

// A non-linear part of an index over two compiled operands (indices into Program::linears).
struct Part {
  PartKind kind;
  int32_t a, b;
  int64_t span;  // kRamp: stride * (lanes - 1)
};

Linear Scaled(Linear x, int64_t k) {
  x.constant *= k;
  for (auto& t : x.terms) t.second *= k;
  for (auto& o : x.opaque) o.first *= k;
  return x;
}

Linear Sum(const Linear& a, const Linear& b, int64_t sign) {
  Linear out;
  out.constant = a.constant + sign * b.constant;
  size_t i = 0, j = 0;
  while (i < a.terms.size() || j < b.terms.size()) {
    if (j == b.terms.size() || (i < a.terms.size() && a.terms[i].first < b.terms[j].first)) {
      out.terms.push_back(a.terms[i++]);
    } else if (i == a.terms.size() || b.terms[j].first < a.terms[i].first) {
      out.terms.emplace_back(b.terms[j].first, sign * b.terms[j].second);
      ++j;
    } else {
      int64_t coef = a.terms[i].second + sign * b.terms[j].second;
      if (coef != 0) out.terms.emplace_back(a.terms[i].first, coef);
      ++i, ++j;
    }
  }
  out.opaque = a.opaque;
  for (const auto& o : b.opaque) out.opaque.emplace_back(sign * o.first, o.second);
  return out;
}

// The loops of one program; a statement refers to them by index.
struct LoopInfo {
  int64_t min, extent, kind;
  int tag;  // 0 none, 1-3 blockIdx.x-z, 4-6 threadIdx.x-z, 7 vthread
  int64_t unroll_pragma;  // pragma_auto_unroll_max_step, -1 where absent
  int role;  // 1: feeds a spatial block iterator, 2: a reduction one (both: 3)
  std::string thread;  // the thread axis bound, "" for none
};

struct BufferInfo {
  std::string name;
  int64_t bytes;
  std::vector<int64_t> shape;
  bool allocated = false;
  bool seen = false;
  std::vector<int64_t> common_loops;  // the loops around every access: the allocation's place
};

constexpr int kRead = 0, kWrite = 1, kReadWrite = 2;

struct BufferAccess {
  int64_t buffer;
  int kind;
  std::vector<std::vector<int32_t>> indices;  // index lists (one per load), each a Linear per dim
};

constexpr int kColumns = 164, kBuffers = 5, kAccessColumns = 18, kCurve = 10;
constexpr int kKindStart = 16, kGpuStart = 49, kBufferStart = 57, kCurveStart = 147, kAllocStart = 157,
              kOuterStart = 161;
constexpr double kCacheLine = 64.0;

double Slog(double x) { return std::log2(std::abs(x) + 1.0); }

// Op counts of a store, per execution; index as the first 16 columns.
enum Count { kMad, kAddSub, kMul, kDivMod, kCmp, kMathFunc, kOtherFunc };  // + 7 for integers

class PerStore {
 public:
  PerStore(TirFields& f, int64_t comm_reduce, const Object* fma, const Object* if_then_else, bool is_gpu)
      : f_(f), comm_reduce_(comm_reduce), fma_(fma), if_then_else_(if_then_else), is_gpu_(is_gpu) {}

  void Visit(const Object* stmt) { VisitStmt(f_, stmt, this); }

  // The rows, in the order of each written buffer's first non-constant store, with the allocation
  // columns, which need every access of the program, filled in.
  void Finish(std::vector<float>* out) {
    for (size_t r = 0; r < rows_.size(); ++r) {
      Alloc(written_[r], &rows_[r]);
      out->insert(out->end(), rows_[r].begin(), rows_[r].end());
    }
  }

 private:
  template <typename Walker>
  friend void VisitStmt(TirFields& f, const Object* stmt, Walker* walker);

  struct Written {  // what the allocation columns of a row need of its statement
    int64_t buffer;
    double outer_prod;
  };

  void VisitBind(const Object* stmt) { bound_[Required(stmt, f_.bind_var)] = Compile(Get(stmt, f_.bind_value)); }

  void VisitFor(const Object* stmt) {
    const Object* var = Required(stmt, f_.loop_var);
    LoopInfo loop{IntOr(Node(stmt, f_.loop_min), 0), IntOr(Node(stmt, f_.extent), 1),
                  Get(stmt, f_.kind).cast<int64_t>(), 0, -1, 0, ""};
    if (const Object* binding = Node(stmt, f_.thread_binding)) {
      String tag = Get(binding, f_.thread_tag).cast<String>();
      loop.thread.assign(tag.data(), tag.size());
      const std::string& text = loop.thread;
      if (text.rfind("blockIdx.", 0) == 0 && text.size() == 10) loop.tag = 1 + (text[9] - 'x');
      else if (text.rfind("threadIdx.", 0) == 0 && text.size() == 11) loop.tag = 4 + (text[10] - 'x');
      else loop.tag = 7;
      if (loop.tag < 0 || loop.tag > 7) loop.tag = 7;
      // A loop bound to a thread axis that an enclosing loop binds already (a cooperative fetch
      // under the kernel's threadIdx.x) runs on the same threads, not inside them: it is that loop,
      // as UnifyThreadBinding makes it before PerStoreFeature reads the program.
      for (int64_t outer : stack_) {
        if (loops_[outer].thread == loop.thread) {
          Linear same;
          same.terms.emplace_back(outer, 1);
          bound_[var] = std::move(same);
          Visit(Required(stmt, f_.for_body));
          return;
        }
      }
    }
    Any annotations = Get(stmt, f_.loop_annotations);
    if (const tvm::ffi::MapObj* map = annotations.as<tvm::ffi::MapObj>()) {
      auto found = map->find(String("pragma_auto_unroll_max_step"));
      if (found != map->end()) {  // an IntImm where TVMScript or a schedule wrote it, else an int
        const Any& value = (*found).second;
        if (const Object* imm = value.as<Object>()) loop.unroll_pragma = IntOr(imm, -1);
        else if (auto number = value.try_cast<int64_t>()) loop.unroll_pragma = *number;
      }
    }
    int64_t index = static_cast<int64_t>(loops_.size());
    loops_.push_back(loop);
    ranges_.push_back({loop.min, loop.min});
    Linear own;
    own.terms.emplace_back(index, 1);
    bound_[var] = std::move(own);
    stack_.push_back(index);
    Visit(Required(stmt, f_.for_body));
    stack_.pop_back();
  }

  void VisitBlock(const Object* realize) {
    const Object* block = Required(realize, f_.realize_block);
    ForEachBinding(f_, realize, [&](const Object* iv, const Any& binding) {
      Linear value = Compile(binding);
      int role = Get(iv, f_.iter_type).cast<int64_t>() == comm_reduce_ ? 2 : 1;
      std::vector<int64_t> used;
      LoopsOf(value, &used);
      for (int64_t loop : used) loops_[loop].role |= role;
      std::array<double, 16> ops{};
      WalkObjects(binding, [&](const Object* node) { CountOps(node, ops.data()); });
      const Object* var = Required(iv, f_.iv_var);
      binding_ops_[var] = ops;
      bound_[var] = std::move(value);
    });
    Any allocs = Get(block, f_.alloc_buffers);
    if (const ArrayObj* list = allocs.as<ArrayObj>()) {
      for (const Any& buffer : *list) buffers_[BufferIndex(buffer)].allocated = true;
    }
    Visit(Node(block, f_.init));
    Visit(Required(block, f_.block_body));
  }

  int64_t IntOr(const Object* node, int64_t fallback) const {
    return node != nullptr && IsInstance(node, f_.int_imm) ? Get(node, f_.int_value).cast<int64_t>() : fallback;
  }

  int32_t Keep(Linear x) {
    linears_.push_back(std::move(x));
    return static_cast<int32_t>(linears_.size() - 1);
  }

  Linear Opaque(PartKind kind, Linear a, Linear b, int64_t span = 0) {
    int32_t ia = Keep(std::move(a)), ib = Keep(std::move(b));
    parts_.push_back({kind, ia, ib, span});
    Linear out;
    out.opaque.emplace_back(1, static_cast<int32_t>(parts_.size() - 1));
    return out;
  }

  Linear Operand(const Object* e, const TVMFFIFieldInfo* field) { return Compile(Get(e, field)); }
  Linear OperandA(const Object* e) { return Operand(e, f_.bin_a.Of(e->type_index())); }
  Linear OperandB(const Object* e) { return Operand(e, f_.bin_b.Of(e->type_index())); }

  Linear Compile(AnyView value) {
    Linear out;
    const Object* e = value.as<Object>();
    if (e == nullptr) return out;
    int32_t type = e->type_index();
    if (type == f_.int_imm) {
      out.constant = Get(e, f_.int_value).cast<int64_t>();
    } else if (IsInstance(e, f_.var)) {
      auto found = bound_.find(e);
      if (found != bound_.end()) out = found->second;  // other variables (symbolic shapes) count as 0
    } else if (type == f_.add || type == f_.sub) {
      out = Sum(OperandA(e), OperandB(e), type == f_.add ? 1 : -1);
    } else if (type == f_.mul) {
      Linear a = OperandA(e), b = OperandB(e);
      if (a.IsConstant()) out = Scaled(std::move(b), a.constant);
      else if (b.IsConstant()) out = Scaled(std::move(a), b.constant);
      else out = Opaque(PartKind::kMul, std::move(a), std::move(b));
    } else if (type == f_.floordiv || type == f_.div || type == f_.floormod || type == f_.mod) {
      Linear a = OperandA(e), b = OperandB(e);
      bool div = type == f_.floordiv || type == f_.div;
      if (b.IsConstant() && b.constant == 1) out = div ? std::move(a) : Linear();
      else out = Opaque(div ? PartKind::kDiv : PartKind::kMod, std::move(a), std::move(b));
    } else if (type == f_.min || type == f_.max) {
      out = Opaque(type == f_.min ? PartKind::kMin : PartKind::kMax, OperandA(e), OperandB(e));
    } else if (type == f_.cast) {
      out = Operand(e, f_.cast_value);
    } else if (type == f_.select) {
      out = Opaque(PartKind::kEither, Operand(e, f_.select_true), Operand(e, f_.select_false));
    } else if (type == f_.ramp) {
      int64_t stride = IntOr(Node(e, f_.ramp_stride), 0), lanes = IntOr(Node(e, f_.ramp_lanes), 1);
      out = Opaque(PartKind::kRamp, Operand(e, f_.ramp_base), Linear(), stride * (lanes - 1));
    } else if (type == f_.broadcast) {
      out = Operand(e, f_.broadcast_value);
    } else if (IsInstance(e, f_.call) && Node(e, f_.call_op) == if_then_else_) {
      Any args = Get(e, f_.call_args);
      const ArrayObj* list = args.as<ArrayObj>();
      if (list != nullptr && list->size() == 3) out = Opaque(PartKind::kEither, Compile((*list)[1]), Compile((*list)[2]));
    }
    return out;
  }

  void LoopsOf(const Linear& x, std::vector<int64_t>* out) const {
    for (const auto& t : x.terms) out->push_back(t.first);
    for (const auto& o : x.opaque) {
      LoopsOf(linears_[parts_[o.second].a], out);
      LoopsOf(linears_[parts_[o.second].b], out);
    }
  }

  Interval Eval(const Linear& x) const {
    int64_t lo = x.constant, hi = x.constant;
    for (const auto& [loop, coef] : x.terms) {
      const Interval& r = ranges_[loop];
      lo += coef * (coef >= 0 ? r.lo : r.hi);
      hi += coef * (coef >= 0 ? r.hi : r.lo);
    }
    for (const auto& [coef, part] : x.opaque) {
      Interval v = EvalPart(parts_[part]);
      lo += coef * (coef >= 0 ? v.lo : v.hi);
      hi += coef * (coef >= 0 ? v.hi : v.lo);
    }
    return {lo, hi};
  }

  Interval EvalPart(const Part& p) const {
    Interval a = Eval(linears_[p.a]);
    if (p.kind == PartKind::kRamp) return {a.lo + std::min<int64_t>(0, p.span), a.hi + std::max<int64_t>(0, p.span)};
    Interval b = Eval(linears_[p.b]);
    switch (p.kind) {
      case PartKind::kDiv:
        if (b.lo == b.hi && b.lo > 0) return {FloorDiv(a.lo, b.lo), FloorDiv(a.hi, b.lo)};
        return a;
      case PartKind::kMod: {
        if (b.lo != b.hi || b.lo <= 0) return {0, std::max<int64_t>(0, b.hi - 1)};
        int64_t d = b.lo, q = FloorDiv(a.lo, d);
        if (a.hi - a.lo + 1 >= d || FloorDiv(a.hi, d) != q) return {0, d - 1};
        return {a.lo - q * d, a.hi - q * d};
      }
      case PartKind::kMin: return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      case PartKind::kMax: return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
      case PartKind::kMul: {
        int64_t c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
        return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
      }
      default: return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
  }

  // Elements of the access's buffer its index lists touch under the present ranges, and per dim.
  int64_t Touched(const BufferAccess& a, std::vector<int64_t>* dims) const {
    const std::vector<int64_t>& shape = buffers_[a.buffer].shape;
    size_t n = a.indices.empty() ? 0 : a.indices[0].size();
    dims->assign(n, 1);
    int64_t count = 1;
    for (size_t d = 0; d < n; ++d) {
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (const auto& index : a.indices) {
        if (d >= index.size()) continue;
        Interval v = Eval(linears_[index[d]]);
        lo = std::min(lo, v.lo), hi = std::max(hi, v.hi);
      }
      int64_t extent = hi >= lo ? hi - lo + 1 : 1;
      if (d < shape.size() && shape[d] > 0) extent = std::min(extent, shape[d]);
      (*dims)[d] = extent;
      count *= extent;
    }
    return count;
  }

  // Elements the flattened index moves by when ``loop`` steps by one from its minimum (all loops at
  // theirs): the smallest over the access's index lists, each read from its last dim that moves.
  int64_t Stride(const BufferAccess& a, int64_t loop) {
    const std::vector<int64_t>& shape = buffers_[a.buffer].shape;
    int64_t best = 0;
    for (const auto& index : a.indices) {
      int64_t step = 1;
      for (size_t d = index.size(); d-- > 0;) {
        const Linear& x = linears_[index[d]];
        int64_t before = Eval(x).lo;
        ranges_[loop] = {loops_[loop].min + 1, loops_[loop].min + 1};
        int64_t after = Eval(x).lo;
        ranges_[loop] = {loops_[loop].min, loops_[loop].min};
        if (after != before) {
          int64_t stride = std::abs(after - before) * step;
          best = best == 0 ? stride : std::min(best, stride);
          break;
        }
        step *= d < shape.size() && shape[d] > 0 ? shape[d] : 1;
      }
    }
    return best;
  }

  int64_t BufferIndex(const Any& handle) {
    const Object* buffer = RequiredItem(handle);
    auto found = buffer_index_.find(buffer);
    if (found != buffer_index_.end()) return found->second;
    BufferDecl decl = ReadBuffer(f_, buffer);
    BufferInfo info;
    String name = Get(buffer, f_.var_name).cast<String>();
    info.name.assign(name.data(), name.size());
    info.bytes = std::max<int64_t>(1, decl.dtype.bits * decl.dtype.lanes / 8);
    info.shape = std::move(decl.shape);
    int64_t index = static_cast<int64_t>(buffers_.size());
    buffers_.push_back(std::move(info));
    buffer_index_.emplace(buffer, index);
    return index;
  }

  std::vector<int32_t> Indices(AnyView list) {
    std::vector<int32_t> out;
    Any held(list);
    if (const ArrayObj* dims = held.as<ArrayObj>()) {
      for (const Any& dim : *dims) out.push_back(Keep(Compile(dim)));
    }
    return out;
  }

  void Accessed(int64_t buffer) {
    BufferInfo& info = buffers_[buffer];
    if (!info.seen) {
      info.common_loops = stack_;
      info.seen = true;
      return;
    }
    size_t k = 0;
    while (k < info.common_loops.size() && k < stack_.size() && info.common_loops[k] == stack_[k]) ++k;
    info.common_loops.resize(k);
  }

  void CountOps(const Object* node, double* counts) {
    int32_t type = node->type_index();
    int column = -1;
    if (type == f_.add || type == f_.sub) column = kAddSub;
    else if (type == f_.mul) column = kMul;
    else if (type == f_.div || type == f_.mod || type == f_.floordiv || type == f_.floormod) column = kDivMod;
    else if (type == f_.min || type == f_.max || IsAny(node, f_.compares)) column = kCmp;
    else if (type == f_.and_ || type == f_.or_ || type == f_.not_) {
      counts[14] += 1;
      return;
    } else if (type == f_.select) {
      counts[15] += 1;
      return;
    } else if (IsInstance(node, f_.call)) {
      const Object* op = Node(node, f_.call_op);
      column = op == fma_ ? kMad : (IsPure(op) ? kMathFunc : kOtherFunc);
    } else if (type == f_.var) {  // a block iterator: the index arithmetic of its binding
      auto found = binding_ops_.find(node);
      if (found != binding_ops_.end()) {
        for (int c = 0; c < 16; ++c) counts[c] += found->second[c];
      }
      return;
    }
    if (column >= 0) counts[column + (IsFloatExpr(node) ? 0 : 7)] += 1;
  }

  // PerStoreFeature's split of calls: pure ones (exp, sqrt, if_then_else...) are math functions.
  bool IsPure(const Object* op) {
    auto found = pure_ops_.find(op);
    if (found != pure_ops_.end()) return found->second;
    bool pure = false;
    if (op != nullptr && IsInstance(op, f_.op)) {
      Any effect = f_.op_get_attr(Any(tvm::ffi::ObjectRef(tvm::ffi::GetObjectPtr<Object>(const_cast<Object*>(op)))),
                                  String("TCallEffectKind"));
      if (auto kind = effect.try_cast<int64_t>()) pure = *kind == 0 || *kind == 1;  // annotation, pure
    }
    pure_ops_.emplace(op, pure);
    return pure;
  }

  bool IsFloatExpr(const Object* expr) {
    const Object* type = Node(expr, f_.expr_ty);
    if (type == nullptr || !IsInstance(type, f_.prim_type)) return false;
    DLDataType dtype = Get(type, f_.prim_dtype).cast<DLDataType>();
    return dtype.code == kDLFloat || dtype.code == kDLBfloat;
  }

  void VisitStore(const Object* store) {
    Any written_handle = Get(store, f_.store_buffer);
    int64_t written = BufferIndex(written_handle);
    Accessed(written);
    const Object* value = Node(store, f_.store_value);
    if (value != nullptr && (IsInstance(value, f_.int_imm) || IsInstance(value, f_.float_imm))) return;

    double counts[16] = {0};
    std::vector<BufferAccess> accesses{{written, kWrite, {Indices(Get(store, f_.store_indices))}}};
    WalkObjects(Get(store, f_.store_indices), [&](const Object* node) { CountOps(node, counts); });
    WalkObjects(Get(store, f_.store_value), [&](const Object* node) {
      CountOps(node, counts);
      if (!IsInstance(node, f_.tensor_load)) return;
      int64_t buffer = BufferIndex(Get(node, f_.load_source));
      Accessed(buffer);
      auto a = std::find_if(accesses.begin(), accesses.end(), [&](const auto& x) { return x.buffer == buffer; });
      if (a == accesses.end()) {
        accesses.push_back({buffer, kRead, {}});
        a = accesses.end() - 1;
      } else if (a->kind != kRead) {
        a->kind = kReadWrite;  // the written buffer, read: its store's indices stand for both
        return;
      }
      a->indices.push_back(Indices(Get(node, f_.load_indices)));
    });

    std::vector<float> row(kColumns, 0.0f);
    std::vector<int64_t> loops;  // the statement's loops that run more than once, outermost first
    for (int64_t loop : stack_) {
      if (loops_[loop].extent > 1) loops.push_back(loop);
    }
    double prod = 1;
    for (int64_t loop : loops) prod *= loops_[loop].extent;
    double float_ops = 0;
    for (int c = 0; c < 16; ++c) row[c] = static_cast<float>(Slog(counts[c] * prod));
    for (int c = 0; c < 7; ++c) float_ops += counts[c] * (c == kMad ? 2 : 1);
    LoopKinds(loops, &row);
    Gpu(&row);
    Access(loops, accesses, float_ops, &row);
    int64_t unroll = -1;
    for (int64_t loop : stack_) unroll = std::max(unroll, loops_[loop].unroll_pragma);
    row[kOuterStart] = static_cast<float>(Slog(prod));
    row[kOuterStart + 1] = static_cast<float>(Slog(static_cast<double>(loops.size())));
    row[kOuterStart + 2] = static_cast<float>(Slog(std::max<int64_t>(0, unroll)));

    auto [at, fresh] = row_of_.emplace(written, rows_.size());
    if (fresh) {
      rows_.push_back(std::move(row));
      written_.push_back({written, prod});
    } else {  // the buffer keeps the place of its first store and is described by its last
      rows_[at->second] = std::move(row);
      written_[at->second] = {written, prod};
    }
    for (const BufferAccess& a : accesses) {
      if (buffers_[a.buffer].allocated) allocated_accesses_[a.buffer].push_back(a);
    }
  }

  // vec / unroll / parallel: how many loops of the kind, the product and the innermost one's
  // extent, and where that one sits (inner / middle / outer loop of the statement; over spatial,
  // reduction or both kinds of block iterators).
  void LoopKinds(const std::vector<int64_t>& loops, std::vector<float>* row) const {
    static const int64_t kKinds[3] = {2 /*vectorized*/, 3 /*unrolled*/, 1 /*parallel*/};
    for (int k = 0; k < 3; ++k) {
      float* out = row->data() + kKindStart + 11 * k;
      double num = 0, prod = 1, len = 0;
      int position = 0;
      for (size_t i = 0; i < loops.size(); ++i) {
        const LoopInfo& loop = loops_[loops[i]];
        if (loop.kind != kKinds[k]) continue;
        num += 1, prod *= loop.extent, len = loop.extent;
        int depth = i + 1 == loops.size() ? 0 : (i == 0 ? 2 : 1);  // inner, middle, outer
        position = loop.role == 3 ? 7 : 1 + depth + (loop.role == 2 ? 3 : 0);
      }
      out[0] = static_cast<float>(Slog(num));
      out[1] = static_cast<float>(Slog(num ? prod : 0));
      out[2] = static_cast<float>(Slog(len));
      out[3 + position] = 1.0f;
    }
  }

  void Gpu(std::vector<float>* row) const {
    float* out = row->data() + kGpuStart;
    out[0] = is_gpu_ ? 1.0f : 0.0f;
    int64_t lens[6] = {1, 1, 1, 1, 1, 1};
    int64_t vthread = 1;
    for (int64_t loop : stack_) {
      const LoopInfo& l = loops_[loop];
      if (l.tag >= 1 && l.tag <= 6) lens[l.tag - 1] = std::max(lens[l.tag - 1], l.extent);
      if (l.tag == 7) vthread *= l.extent;
    }
    for (int i = 0; i < 6; ++i) out[1 + i] = static_cast<float>(Slog(lens[i]));
    out[7] = static_cast<float>(Slog(vthread));
  }

  struct Sub {
    double lines, bytes;
    std::string name;
    float values[kAccessColumns];
  };

  // B0..B4 and the arithmetic-intensity curve; the rules of features/regions.py (PerStoreFeature's,
  // with its touched regions bounded per loop level) on the compiled indices.
  void Access(const std::vector<int64_t>& loops, const std::vector<BufferAccess>& accesses, double float_ops,
              std::vector<float>* row) {
    size_t n = loops.size();
    std::vector<int64_t> extents(n);
    double prod = 1;
    for (size_t i = 0; i < n; ++i) extents[i] = loops_[loops[i]].extent, prod *= extents[i];
    std::vector<int64_t> numel(accesses.size(), 1);
    std::vector<std::vector<int64_t>> top(accesses.size());
    std::vector<double> touched_bytes(n, 0.0);
    std::vector<int64_t> dims;
    for (size_t i = 0; i < n; ++i) ranges_[loops[i]] = {loops_[loops[i]].min, loops_[loops[i]].min + extents[i] - 1};
    for (size_t i = 0; i < n; ++i) {
      auto& under = touched_under_[loops[i]];
      for (size_t k = 0; k < accesses.size(); ++k) {
        int64_t count = Touched(accesses[k], &dims);
        if (i == 0) numel[k] = count, top[k] = dims;
        touched_bytes[i] += static_cast<double>(count) * buffers_[accesses[k].buffer].bytes;
        under[accesses[k].buffer].push_back(count);
      }
      ranges_[loops[i]] = {loops_[loops[i]].min, loops_[loops[i]].min};
    }
    double top_touch_bytes = 0;
    if (n) {
      for (const auto& a : accesses) top_touch_bytes += buffers_[a.buffer].bytes;
    }
    const std::vector<int64_t>& written_dims = top[0];
    std::vector<Sub> subs;
    for (size_t k = 0; k < accesses.size(); ++k) {
      subs.push_back(SubFeature(accesses[k], loops, extents, prod, numel[k], written_dims, top_touch_bytes));
    }
    std::stable_sort(subs.begin(), subs.end(), [](const Sub& x, const Sub& y) {
      if (x.lines != y.lines) return x.lines > y.lines;
      if (x.bytes != y.bytes) return x.bytes > y.bytes;
      return x.name < y.name;
    });
    for (size_t k = 0; k < subs.size() && k < static_cast<size_t>(kBuffers); ++k) {
      std::copy(subs[k].values, subs[k].values + kAccessColumns, row->data() + kBufferStart + kAccessColumns * k);
    }
    Curve(float_ops, extents, touched_bytes, row->data() + kCurveStart);
  }

  double BytesUnder(int64_t loop) const {
    auto found = touched_under_.find(loop);
    if (found == touched_under_.end()) return 0;
    double total = 0;
    for (const auto& [buffer, counts] : found->second) {
      for (int64_t c : counts) total += static_cast<double>(c) * buffers_[buffer].bytes;
    }
    return total;
  }

  Sub SubFeature(const BufferAccess& a, const std::vector<int64_t>& loops, const std::vector<int64_t>& extents,
                 double prod, int64_t numel, const std::vector<int64_t>& written, double top_touch_bytes) {
    const BufferInfo& info = buffers_[a.buffer];
    int64_t n = static_cast<int64_t>(loops.size());
    const std::vector<int64_t>& shape = info.shape;
    double continuous = static_cast<double>(info.bytes);
    for (size_t d = std::min(written.size(), shape.size()); d-- > 0;) {
      if (written[d] == shape[d]) {
        continuous *= written[d];
        break;
      }
    }
    int64_t stride = 0, i = n - 1;
    for (; i >= 0; --i) {
      stride = Stride(a, loops[i]);
      if (stride) break;
    }
    int64_t innermost_stride = i == n - 1 ? stride : 0;
    double non_strided = 1;
    for (int64_t j = i + 1; j < n; ++j) non_strided *= extents[j];

    std::vector<int64_t> used;
    for (const auto& index : a.indices) {
      for (int32_t d : index) LoopsOf(linears_[d], &used);
    }
    int reuse = 2;  // none
    double dis_iter = 0, dis_bytes = 0, reuse_ct = 0;
    for (int64_t j = n - 1; j >= 0; --j) {
      if (std::find(used.begin(), used.end(), loops[j]) == used.end()) {
        reuse = 0, reuse_ct = extents[j];
        dis_iter = 1;
        for (int64_t k = j + 1; k < n; ++k) dis_iter *= extents[k];
        dis_bytes = j == n - 1 ? top_touch_bytes : BytesUnder(loops[j + 1]);
        break;
      }
      const auto& touched = touched_under_[loops[j]][a.buffer];
      if (touched.size() >= 2) {
        reuse = 1, reuse_ct = static_cast<double>(touched.size() - 1);
        dis_iter = static_cast<double>(*std::min_element(touched.begin(), touched.end())) / extents[j];
        dis_bytes = BytesUnder(loops[j]) / extents[j];
        break;
      }
    }
    double bytes = info.bytes * prod, unique_bytes = 1, lines = 1, unique_lines = 1;
    if (n) {
      unique_bytes = static_cast<double>(numel) * info.bytes;
      lines = std::max(1.0, prod / non_strided * std::min(1.0, stride * info.bytes / kCacheLine));
      unique_lines = std::max(1.0, unique_bytes / std::min(kCacheLine, continuous));
    }
    double proxy = reuse_ct > 0 ? reuse_ct : 0.5;
    Sub s{lines, bytes, info.name, {}};
    float* v = s.values;
    v[0] = a.kind == kRead, v[1] = a.kind == kWrite, v[2] = a.kind == kReadWrite;
    v[3] = Slog(bytes), v[4] = Slog(unique_bytes), v[5] = Slog(lines), v[6] = Slog(unique_lines);
    v[7] = reuse == 0, v[8] = reuse == 1, v[9] = reuse == 2;
    v[10] = Slog(dis_iter), v[11] = Slog(dis_bytes), v[12] = Slog(reuse_ct);
    v[13] = Slog(bytes / proxy), v[14] = Slog(unique_bytes / proxy), v[15] = Slog(lines / proxy);
    v[16] = Slog(unique_lines / proxy), v[17] = Slog(static_cast<double>(innermost_stride));
    return s;
  }

  static void Curve(double ops_per_iteration, const std::vector<int64_t>& extents,
                    const std::vector<double>& touched_bytes, float* out) {
    size_t n = extents.size();
    std::vector<double> compute, memory(touched_bytes.rbegin(), touched_bytes.rend());
    double total = ops_per_iteration;
    for (size_t i = n; i-- > 0;) {
      total *= extents[i];
      compute.push_back(total);
    }
    if (total <= 0 || compute.empty()) return;
    size_t p = 0;
    for (int k = 0; k < kCurve; ++k) {
      double target = (k + 1.0) / kCurve * compute.back(), value;
      while (p < n && compute[p] < target - 1e-4) ++p;
      if (p == 0) {
        value = compute[0] / std::max(memory[0], 1.0);
      } else {
        size_t q = std::min(p, n - 1);
        double base = compute[p - 1] / std::max(memory[p - 1], 1.0);
        double span = compute[q] - compute[p - 1];
        double slope = span > 0 ? (compute[q] / std::max(memory[q], 1.0) - base) / span : 0;
        value = base + slope * (target - compute[p - 1]);
      }
      out[k] = static_cast<float>(Slog(value));
    }
  }

  // The allocation columns of a row: for a buffer allocated in the program, the bytes of the region
  // all its accesses touch inside the loops around every one of them (CompactBufferAllocation's
  // size) and the loops outside and inside that point; a parameter counts as allocated whole,
  // outside every loop. alloc_prod is in elements, as PerStoreFeature's.
  void Alloc(const Written& w, std::vector<float>* row) {
    const BufferInfo& info = buffers_[w.buffer];
    double elements = 1, outer_prod = 1;
    if (info.allocated) {
      for (size_t l = 0; l < loops_.size(); ++l) ranges_[l] = {loops_[l].min, loops_[l].min + loops_[l].extent - 1};
      for (int64_t loop : info.common_loops) ranges_[loop] = {loops_[loop].min, loops_[loop].min};
      BufferAccess all{w.buffer, kWrite, {}};
      for (const auto& access : allocated_accesses_[w.buffer]) {
        all.indices.insert(all.indices.end(), access.indices.begin(), access.indices.end());
      }
      std::vector<int64_t> dims;
      elements = static_cast<double>(Touched(all, &dims));
      for (size_t l = 0; l < loops_.size(); ++l) ranges_[l] = {loops_[l].min, loops_[l].min};
      for (int64_t loop : info.common_loops) outer_prod *= std::max<int64_t>(1, loops_[loop].extent);
    } else {
      for (int64_t d : info.shape) elements *= std::max<int64_t>(1, d);
    }
    float* out = row->data() + kAllocStart;
    out[0] = static_cast<float>(Slog(elements * info.bytes));
    out[1] = static_cast<float>(Slog(elements * outer_prod));
    out[2] = static_cast<float>(Slog(outer_prod));
    out[3] = static_cast<float>(Slog(w.outer_prod / outer_prod));
  }

  TirFields& f_;
  int64_t comm_reduce_;
  const Object *fma_, *if_then_else_;
  bool is_gpu_;
  std::vector<LoopInfo> loops_;
  mutable std::vector<Interval> ranges_;  // per loop: its minimum, or its range where being bounded
  std::vector<int64_t> stack_;
  std::unordered_map<const Object*, Linear> bound_;  // loop, block-iterator and let variables
  std::vector<Linear> linears_;
  std::vector<Part> parts_;
  std::vector<BufferInfo> buffers_;
  std::unordered_map<const Object*, int64_t> buffer_index_;
  // per loop, per buffer: elements each access under the loop touched, statements in program order
  std::unordered_map<int64_t, std::unordered_map<int64_t, std::vector<int64_t>>> touched_under_;
  std::unordered_map<int64_t, std::vector<BufferAccess>> allocated_accesses_;
  std::vector<std::vector<float>> rows_;
  std::vector<Written> written_;
  std::unordered_map<int64_t, size_t> row_of_;
  std::unordered_map<const Object*, bool> pure_ops_;
  std::unordered_map<const Object*, std::array<double, 16>> binding_ops_;  // per block iterator
};

}  // namespace

// funcs: PrimFuncs as a schedule leaves them; is_gpu: the target's kind is a GPU's; comm_reduce:
// IterVar's reduction kind; fma and if_then_else: the ops counted apart. Returns [float32 rows of
// every program, joined, as bytes; rows per program; indices of the programs that could not be read].
Array<Any> per_store_rows(const Array<Any>& funcs, bool is_gpu, int64_t comm_reduce, const Any& fma,
                          const Any& if_then_else) {
  TirFields& fields = Fields();
  std::vector<float> values;
  std::vector<int64_t> counts, failed;
  for (size_t i = 0; i < funcs.size(); ++i) {
    PerStore extractor(fields, comm_reduce, fma.as<Object>(), if_then_else.as<Object>(), is_gpu);
    std::vector<float> rows;
    try {
      const Object* func = funcs[i].as<Object>();
      TVM_FFI_ICHECK(func != nullptr && IsInstance(func, fields.prim_func)) << "not a PrimFunc";
      extractor.Visit(Node(func, fields.func_body));
      extractor.Finish(&rows);
    } catch (const std::exception&) {
      failed.push_back(static_cast<int64_t>(i));
      rows.clear();
    }
    values.insert(values.end(), rows.begin(), rows.end());
    counts.push_back(static_cast<int64_t>(rows.size() / kColumns));
  }
  return Array<Any>{Bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)),
                    Shape(std::move(counts)), Shape(std::move(failed))};
}
