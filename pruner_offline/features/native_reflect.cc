// What the package's C++ readers of TIR (native_skeleton.cc, native_walk.cc) share; native.py
// compiles the three files as one source. The TVM wheel ships tvm-ffi's headers but not TIR's, so
// nodes are read the way Python reads them: through the reflection table, each field's getter
// found once by type key and name.

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/extra/structural_visit.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/accessor.h>
#include <tvm/ffi/string.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using tvm::ffi::Any;
using tvm::ffi::Array;
using tvm::ffi::ArrayObj;
using tvm::ffi::Bytes;
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

}  // namespace
