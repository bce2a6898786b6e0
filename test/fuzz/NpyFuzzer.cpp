//===- NpyFuzzer.cpp - the .npy reader ------------------------------------===//
//
// Oracle: readNpy returns a tensor whose bytes are exactly its shape's, or
// throws ztc::rt::Error with a one-line message that starts with the path.
//
//===----------------------------------------------------------------------===//

#include "runtime/Error.h"
#include "runtime/io/Npy.h"
#include "test/fuzz/FuzzSupport.h"

using namespace ztc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const fuzz::ScratchDir dir("npy");
  std::string path = dir.write("input.npy", data, size);
  try {
    rt::Tensor tensor = rt::readNpy(path);
    std::optional<int64_t> bytes =
        rt::checkedByteSize(tensor.shape, rt::dtypeSize(tensor.dtype));
    if (!bytes || static_cast<size_t>(*bytes) != tensor.bytes.size())
      fuzz::fail("readNpy", "tensor " + tensor.describe() + " holds " +
                                std::to_string(tensor.bytes.size()) + " bytes");
  } catch (const rt::Error &error) {
    fuzz::requireOneLine(error.what(), "readNpy");
    if (std::string(error.what()).rfind(path, 0) != 0)
      fuzz::fail("readNpy", std::string("message does not name the file: ") +
                                error.what());
  }
  return 0;
}
