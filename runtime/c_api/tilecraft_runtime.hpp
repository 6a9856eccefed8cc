// tilecraft_runtime.hpp: a header-only C++ (11 or later) wrapper over tilecraft_runtime.h.
//
// Why a wrapper: the C API reports errors as status codes and hands out a pointer the
// caller must close; in C++ a failure is an exception (tilecraft::Error, carrying the
// status and the message) and a tilecraft::Model closes its package when it goes out of
// scope. Everything else (the checks, the threads rule: run() may be called from many
// threads at once on one Model) is the C API's; see that header and docs/deploy.md.
//
//   tilecraft::Model model("digits.tar");
//   std::vector<float> logits(n * 10);
//   auto input = tilecraft::tensor(images.data(), images.size(), {n, 1, 16, 16});
//   auto output = tilecraft::tensor(logits.data(), logits.size(), {n, 10});
//   model.run({input}, {&output});
#ifndef TILECRAFT_RUNTIME_HPP
#define TILECRAFT_RUNTIME_HPP

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "tilecraft_runtime.h"

namespace tilecraft {

// A failed call of the C API: its status and message.
class Error : public std::runtime_error {
 public:
  Error(tilecraft_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
  tilecraft_status status() const noexcept { return status_; }

 private:
  tilecraft_status status_;
};

inline void check(tilecraft_status status, const tilecraft_error &error) {
  if (status != TILECRAFT_OK)
    throw Error(status, error.message);
}

// An input or output as the package declares it (-1: a dimension known at run time).
struct TensorInfo {
  std::string name;
  tilecraft_dtype dtype;
  std::vector<int64_t> shape;
};

// The dtype of a C++ element type (float, double, the fixed-width integers, bool).
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr tilecraft_dtype value = TILECRAFT_FLOAT32; };
template <> struct dtype_of<double> { static constexpr tilecraft_dtype value = TILECRAFT_FLOAT64; };
template <> struct dtype_of<int8_t> { static constexpr tilecraft_dtype value = TILECRAFT_INT8; };
template <> struct dtype_of<int16_t> { static constexpr tilecraft_dtype value = TILECRAFT_INT16; };
template <> struct dtype_of<int32_t> { static constexpr tilecraft_dtype value = TILECRAFT_INT32; };
template <> struct dtype_of<int64_t> { static constexpr tilecraft_dtype value = TILECRAFT_INT64; };
template <> struct dtype_of<uint8_t> { static constexpr tilecraft_dtype value = TILECRAFT_UINT8; };
template <> struct dtype_of<uint16_t> { static constexpr tilecraft_dtype value = TILECRAFT_UINT16; };
template <> struct dtype_of<uint32_t> { static constexpr tilecraft_dtype value = TILECRAFT_UINT32; };
template <> struct dtype_of<uint64_t> { static constexpr tilecraft_dtype value = TILECRAFT_UINT64; };
template <> struct dtype_of<bool> { static constexpr tilecraft_dtype value = TILECRAFT_BOOL; };

// A tensor struct over `count` caller-owned elements at `data`, with `shape` (for an
// output: the room, and the shape run() overwrites). Throws for a rank above the limit.
template <typename T>
tilecraft_tensor tensor(T *data, size_t count, std::initializer_list<int64_t> shape) {
  if (shape.size() > TILECRAFT_MAX_RANK)
    throw Error(TILECRAFT_ERROR_INVALID_ARGUMENT, "tilecraft::tensor: rank above TILECRAFT_MAX_RANK");
  tilecraft_tensor result = {};
  result.data = static_cast<void *>(const_cast<typename std::remove_const<T>::type *>(data));
  result.size_bytes = count * sizeof(T);
  result.dtype = dtype_of<typename std::remove_const<T>::type>::value;
  result.rank = static_cast<int32_t>(shape.size());
  int32_t axis = 0;
  for (int64_t size : shape)
    result.shape[axis++] = size;
  return result;
}

// An open package; closed by the destructor. Movable, not copyable.
class Model {
 public:
  // Open `path` (a .tar, a .so from export_library, or an extracted folder); with a
  // `trust_key` file, only a .tar signed with that key. Throws tilecraft::Error.
  explicit Model(const std::string &path, const std::string &trust_key = std::string()) {
    tilecraft_error error;
    check(tilecraft_model_open(path.c_str(), trust_key.empty() ? nullptr : trust_key.c_str(), &model_, &error), error);
  }
  ~Model() { tilecraft_model_close(model_); }
  Model(Model &&other) noexcept : model_(other.model_) { other.model_ = nullptr; }
  Model &operator=(Model &&other) noexcept {
    std::swap(model_, other.model_);
    return *this;
  }
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  std::vector<TensorInfo> inputs() const { return describe(tilecraft_model_num_inputs(model_), &tilecraft_model_input); }
  std::vector<TensorInfo> outputs() const {
    return describe(tilecraft_model_num_outputs(model_), &tilecraft_model_output);
  }
  std::string manifest() const {
    const char *text = tilecraft_model_manifest(model_);
    return text ? text : "";
  }

  // Run on caller-owned buffers (inputs and outputs in the package's order); each output's
  // rank and shape are set. Throws tilecraft::Error. Thread-safe.
  void run(const std::vector<tilecraft_tensor> &inputs, const std::vector<tilecraft_tensor *> &outputs) const {
    std::vector<tilecraft_tensor> results;
    results.reserve(outputs.size());
    for (tilecraft_tensor *output : outputs) {
      if (!output)
        throw Error(TILECRAFT_ERROR_INVALID_ARGUMENT, "tilecraft::Model::run: a null output");
      results.push_back(*output);
    }
    tilecraft_error error;
    tilecraft_status status = tilecraft_model_run(model_, inputs.data(), inputs.size(), results.data(), results.size(),
                                                  &error);
    for (size_t i = 0; i < outputs.size(); ++i) {  // shapes too when a buffer was too small
      outputs[i]->rank = results[i].rank;
      for (int32_t d = 0; d < TILECRAFT_MAX_RANK; ++d)
        outputs[i]->shape[d] = results[i].shape[d];
    }
    check(status, error);
  }

  const tilecraft_model *get() const noexcept { return model_; }

 private:
  typedef tilecraft_status (*describer)(const tilecraft_model *, size_t, tilecraft_tensor_info *);
  std::vector<TensorInfo> describe(size_t count, describer what) const {
    std::vector<TensorInfo> result;
    for (size_t i = 0; i < count; ++i) {
      tilecraft_tensor_info info;
      if (what(model_, i, &info) != TILECRAFT_OK)
        throw Error(TILECRAFT_ERROR_INVALID_ARGUMENT, "tilecraft::Model: no tensor " + std::to_string(i));
      result.push_back(TensorInfo{info.name, info.dtype, std::vector<int64_t>(info.shape, info.shape + info.rank)});
    }
    return result;
  }

  tilecraft_model *model_ = nullptr;
};

}  // namespace tilecraft

#endif  // TILECRAFT_RUNTIME_HPP
