//===- TokenDatasetFuzzer.cpp - the token dataset reader ------------------===//
//
// The input is one dataset: its first byte picks the layout (even:
// Megatron's PREFIX.idx + PREFIX.bin; odd: ztc's tokens.npy +
// offsets.npy), the next four (little-endian) how many of the rest go to
// the first file, the rest to the second.
//
// Oracle: TokenDataset::open either throws ztc::rt::Error with a one-line
// message that names a file of the dataset, or returns a dataset whose
// documents all read, their lengths summing to numTokens().
//
//===----------------------------------------------------------------------===//

#include "runtime/Error.h"
#include "runtime/train/TokenDataset.h"
#include "test/fuzz/FuzzSupport.h"

#include <algorithm>
#include <vector>

using namespace ztc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const fuzz::ScratchDir dir("token-dataset");
  static const fuzz::ScratchDir npyDir("token-dataset-npy");
  if (size < 5)
    return 0;
  bool ztcLayout = data[0] & 1;
  size_t first = size_t(data[1]) | size_t(data[2]) << 8 |
                 size_t(data[3]) << 16 | size_t(data[4]) << 24;
  data += 5;
  size -= 5;
  first = std::min(first, size);
  std::string path;
  if (ztcLayout) {
    npyDir.write("offsets.npy", data, first);
    path = npyDir.write("tokens.npy", data + first, size - first);
    path = path.substr(0, path.size() - std::string("/tokens.npy").size());
  } else {
    dir.write("mega.idx", data, first);
    path = dir.write("mega.bin", data + first, size - first);
    path = path.substr(0, path.size() - std::string(".bin").size());
  }
  try {
    rt::TokenDataset dataset = rt::TokenDataset::open(path);
    uint64_t total = 0;
    std::vector<int64_t> tokens;
    for (uint64_t d = 0; d < dataset.numDocuments(); ++d) {
      uint64_t length = dataset.length(d);
      tokens.resize(length);
      dataset.read(d, 0, length, tokens.data());
      total += length;
    }
    if (total != dataset.numTokens())
      fuzz::fail("TokenDataset", "documents hold " + std::to_string(total) +
                                     " tokens, numTokens() says " +
                                     std::to_string(dataset.numTokens()));
  } catch (const rt::Error &error) {
    fuzz::requireOneLine(error.what(), "TokenDataset");
    if (std::string(error.what()).find(path) == std::string::npos)
      fuzz::fail("TokenDataset",
                 std::string("message does not name the dataset: ") +
                     error.what());
  }
  return 0;
}
