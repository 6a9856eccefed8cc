// Classify the held-out handwritten digits with a tilecraft package, from C++ alone (the
// RAII wrapper tilecraft_runtime.hpp). Same arguments and output as classify_digits.c:
//
//   classify_digits_cpp PACKAGE IMAGES LABELS [LOGITS]
//
// The whole split goes in one call here (the batch dimension is dynamic).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

#include "tilecraft_runtime.hpp"

static std::vector<char> read_all(const char *path) {
  std::ifstream stream(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
}

int main(int argc, char **argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0] << " PACKAGE IMAGES LABELS [LOGITS]\n";
    return 1;
  }
  std::vector<char> image_bytes = read_all(argv[2]), labels = read_all(argv[3]);
  const int64_t count = static_cast<int64_t>(labels.size());
  if (count == 0 || image_bytes.size() != static_cast<size_t>(count) * 256 * sizeof(float)) {
    std::cerr << "cannot read " << argv[2] << " and " << argv[3] << " as images and labels\n";
    return 1;
  }
  std::vector<float> images(static_cast<size_t>(count) * 256), logits(static_cast<size_t>(count) * 10);
  std::copy(image_bytes.begin(), image_bytes.end(), reinterpret_cast<char *>(images.data()));
  try {
    tilecraft::Model model(argv[1]);
    for (const tilecraft::TensorInfo &input : model.inputs()) {
      std::cout << "input '" << input.name << "' " << tilecraft_dtype_name(input.dtype) << " [";
      for (size_t d = 0; d < input.shape.size(); ++d)
        std::cout << (d ? ", " : "") << input.shape[d];
      std::cout << "]\n";
    }
    tilecraft_tensor x = tilecraft::tensor(images.data(), images.size(), {count, 1, 16, 16});
    tilecraft_tensor y = tilecraft::tensor(logits.data(), logits.size(), {});
    model.run({x}, {&y});
    std::cout << "output shape [" << y.shape[0] << ", " << y.shape[1] << "]\n";
  } catch (const tilecraft::Error &error) {
    std::cerr << "error (" << tilecraft_status_name(error.status()) << "): " << error.what() << "\n";
    return 1;
  }
  int64_t correct = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float *row = &logits[static_cast<size_t>(i) * 10];
    correct += std::max_element(row, row + 10) - row == labels[static_cast<size_t>(i)];
  }
  std::printf("accuracy: %.4f (%lld of %lld held-out digits)\n", static_cast<double>(correct) / count,
              static_cast<long long>(correct), static_cast<long long>(count));
  if (argc > 4) {
    std::ofstream out(argv[4], std::ios::binary);
    out.write(reinterpret_cast<const char *>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
    if (!out)
      return 1;
  }
  return 0;
}
