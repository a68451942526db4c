// The loop skeleton of scheduled PrimFuncs (tir_walk.skeleton) read in C++, for a whole population in
// one call, with native_reflect.cc's readers. native_skeleton.py documents what is returned;
// tir_walk.skeleton is the reference.

namespace {

void AppendSized(std::string* out, const String& text) {
  *out += std::to_string(text.size());
  *out += ':';
  out->append(text.data(), text.size());
}

// One program's skeleton. The key is tir_walk.skeleton's shape list written out without ambiguity
// (names carry their length): a loop "F<kind>,<len>:<var name><len>:<thread tag>", a store
// "S<len>:<buffer name>", a statement list "Q<length>;".
struct Skeleton {
  std::string key;
  std::vector<int64_t> extents;
  Array<Any> loop_vars;
};

void Visit(TirFields& r, int64_t thread_binding_kind, const Object* stmt, Skeleton* out) {
  while (stmt != nullptr) {  // down a chain of single bodies without recursing
    int32_t type = stmt->type_index();
    if (type == r.for_) {
      Any var = Get(stmt, r.loop_var);
      TVM_FFI_ICHECK(var.as<Object>() != nullptr) << "a loop without its variable";
      int64_t kind = Get(stmt, r.kind).cast<int64_t>();
      out->key += 'F';
      out->key += std::to_string(kind);
      out->key += ',';
      AppendSized(&out->key, Get(var.as<Object>(), r.var_name).cast<String>());
      if (kind == thread_binding_kind) {
        AppendSized(&out->key, Get(Required(stmt, r.thread_binding), r.thread_tag).cast<String>());
      } else {
        out->key += "0:";
      }
      const Object* extent = Node(stmt, r.extent);
      out->extents.push_back(extent != nullptr && extent->type_index() == r.int_imm
                                 ? Get(extent, r.int_value).cast<int64_t>()
                                 : 1);
      out->loop_vars.push_back(std::move(var));
      stmt = Node(stmt, r.for_body);
    } else if (type == r.block_realize) {
      const Object* block = Required(stmt, r.realize_block);
      Visit(r, thread_binding_kind, Node(block, r.init), out);
      stmt = Node(block, r.block_body);
    } else if (type == r.buffer_store) {
      out->key += 'S';
      const Object* buffer = Required(stmt, r.store_buffer);
      const TVMFFIFieldInfo* name = r.name.Of(buffer->type_index());
      TVM_FFI_ICHECK(name != nullptr) << "a buffer without a name";
      AppendSized(&out->key, Get(buffer, name).cast<String>());
      return;
    } else if (type == r.seq_stmt) {
      Any seq = Get(stmt, r.seq);
      const ArrayObj* items = seq.as<ArrayObj>();
      TVM_FFI_ICHECK(items != nullptr) << "a statement list without its statements";
      out->key += 'Q';
      out->key += std::to_string(items->size());
      out->key += ';';
      for (const Any& item : *items) Visit(r, thread_binding_kind, item.as<Object>(), out);
      return;
    } else if (type == r.if_then_else) {
      Visit(r, thread_binding_kind, Node(stmt, r.then_case), out);
      stmt = Node(stmt, r.else_case);
    } else {
      const TVMFFIFieldInfo* body = type == r.bind ? nullptr : r.body.Of(type);
      stmt = body == nullptr ? nullptr : Node(stmt, body);
    }
  }
}

}  // namespace

// funcs: PrimFuncs. Returns [keys (bytes, joined), key ends, extents (joined), loop ends, unit
// loops (bytes: per program `stride` bytes, bit i set where loop i has extent 1), stride, loop
// variables (an array per program), indices of the programs that could not be read].
Array<Any> loop_skeletons(const Array<Any>& funcs, int64_t thread_binding_kind) {
  TirFields& reader = Fields();
  std::string keys;
  std::vector<int64_t> key_ends, extents, loop_ends, failed;
  Array<Any> loop_vars;
  size_t most_loops = 0;
  for (size_t i = 0; i < funcs.size(); ++i) {
    Skeleton program;
    const Object* func = funcs[i].as<Object>();
    try {
      TVM_FFI_ICHECK(func != nullptr && func->type_index() == reader.prim_func) << "not a PrimFunc";
      Visit(reader, thread_binding_kind, Node(func, reader.func_body), &program);
    } catch (const std::exception&) {
      failed.push_back(static_cast<int64_t>(i));
      program = Skeleton();
    }
    keys += program.key;
    key_ends.push_back(static_cast<int64_t>(keys.size()));
    extents.insert(extents.end(), program.extents.begin(), program.extents.end());
    loop_ends.push_back(static_cast<int64_t>(extents.size()));
    most_loops = std::max(most_loops, program.extents.size());
    loop_vars.push_back(std::move(program.loop_vars));
  }
  size_t stride = (most_loops + 7) / 8;
  std::string units(stride * funcs.size(), '\0');
  int64_t begin = 0;
  for (size_t i = 0; i < funcs.size(); ++i) {
    for (int64_t j = begin; j < loop_ends[i]; ++j) {
      if (extents[j] == 1) units[i * stride + (j - begin) / 8] |= static_cast<char>(1 << ((j - begin) % 8));
    }
    begin = loop_ends[i];
  }
  return Array<Any>{Bytes(std::move(keys)), Shape(std::move(key_ends)), Shape(std::move(extents)),
                    Shape(std::move(loop_ends)), Bytes(std::move(units)), static_cast<int64_t>(stride),
                    loop_vars, Shape(std::move(failed))};
}
