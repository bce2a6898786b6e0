//===- RankOrderCheck.cpp - the MPI communicator adds in rank order -------===//
//
// Run under mpirun with any number of ranks (ctest starts 4). Every rank
// fills buffers whose float sum depends on the order it is added in
// (values from 1e-4 to 1e4 of either sign), runs the step's all-reduce and reduce-scatter through the
// communicator's C table in f32, f64, bf16 and f16, over counts that do and
// do not divide by the world size, and compares the result bit for bit
// with the sum this rank computes alone from rank 0 up (half types: in f32,
// rounded once). It also checks that every rank holds the same all-reduce
// result. Prints one line per rank and exits non-zero on any difference.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/kernels/Half.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace ztc::rt;

namespace {

/// Rank r's element i: a sign, a mantissa and a power of ten from 1e-4 to
/// 1e4 drawn from a hash of (r, i), so that floating-point sums of these
/// depend on the order they are added in.
double value(int rank, int64_t i) {
  uint64_t h = uint64_t(i) * 0x9e3779b97f4a7c15ull + uint64_t(rank + 1) *
                                                         0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  double mantissa = 1.0 + double(h % 1000003) / 1000003.0;
  int exponent = int((h >> 24) % 9) - 4;
  double x = mantissa * std::pow(10.0, exponent);
  return (h >> 40) & 1 ? -x : x;
}

/// The element as the dtype stores it, widened to double for the sum.
struct Typed {
  int32_t dtype;
  const char *name;
  size_t bytes;

  void store(double x, void *data, int64_t i) const {
    switch (dtype) {
    case ZTC_COMM_F64:
      static_cast<double *>(data)[i] = x;
      break;
    case ZTC_COMM_F32:
      static_cast<float *>(data)[i] = float(x);
      break;
    case ZTC_COMM_BF16:
      static_cast<uint16_t *>(data)[i] =
          ztc::half_detail::floatToBFloat16Bits(float(x));
      break;
    default:
      static_cast<uint16_t *>(data)[i] =
          ztc::half_detail::floatToHalfBits(float(x));
    }
  }

  double load(const void *data, int64_t i) const {
    switch (dtype) {
    case ZTC_COMM_F64:
      return static_cast<const double *>(data)[i];
    case ZTC_COMM_F32:
      return static_cast<const float *>(data)[i];
    case ZTC_COMM_BF16:
      return ztc::half_detail::bfloat16BitsToFloat(
          static_cast<const uint16_t *>(data)[i]);
    default:
      return ztc::half_detail::halfBitsToFloat(
          static_cast<const uint16_t *>(data)[i]);
    }
  }

  /// Element i of the rank-ordered sum of every rank's `values`, as this
  /// dtype stores it: f64 adds in double, the others in float.
  void orderedSum(int worldSize, int64_t count, int64_t offset, int64_t i,
                  void *out) const {
    std::vector<char> one(bytes);
    if (dtype == ZTC_COMM_F64) {
      double sum = 0;
      for (int r = 0; r < worldSize; ++r) {
        store(value(r, offset + i), one.data(), 0);
        sum = r == 0 ? load(one.data(), 0) : sum + load(one.data(), 0);
      }
      store(sum, out, i);
      return;
    }
    float sum = 0;
    for (int r = 0; r < worldSize; ++r) {
      store(value(r, offset + i), one.data(), 0);
      float x = float(load(one.data(), 0));
      sum = r == 0 ? x : sum + x;
    }
    store(double(sum), out, i);
  }
};

} // namespace

int main() {
  std::unique_ptr<Communicator> comm = makeMpiCommunicator();
  int rank = comm->rank(), worldSize = comm->worldSize();
  const ztc_comm *table = comm->table();
  if (!table) {
    std::fprintf(stderr, "error: run this check under mpirun with at least 2 "
                         "ranks\n");
    return 1;
  }
  const Typed types[] = {{ZTC_COMM_F32, "f32", 4},
                         {ZTC_COMM_F64, "f64", 8},
                         {ZTC_COMM_BF16, "bf16", 2},
                         {ZTC_COMM_F16, "f16", 2}};
  int failures = 0, checked = 0;
  for (const Typed &type : types) {
    for (int64_t count : {int64_t(1), int64_t(7), int64_t(1000)}) {
      // All-reduce, in place, as the step calls it.
      std::vector<char> data(size_t(count) * type.bytes);
      for (int64_t i = 0; i < count; ++i)
        type.store(value(rank, i), data.data(), i);
      std::vector<char> want(data.size());
      for (int64_t i = 0; i < count; ++i)
        type.orderedSum(worldSize, count, 0, i, want.data());
      if (table->all_reduce_sum(table->self, data.data(), data.data(), count,
                                type.dtype, nullptr) != 0 ||
          std::memcmp(data.data(), want.data(), data.size()) != 0) {
        std::fprintf(stderr, "rank %d: all_reduce %s of %lld elements is not "
                             "the rank-ordered sum\n",
                     rank, type.name, (long long)count);
        ++failures;
      }
      // Every rank holds the same bits.
      std::string mine(data.begin(), data.end());
      for (const std::string &theirs : comm->allGatherBytes(mine))
        if (theirs != mine) {
          std::fprintf(stderr, "rank %d: all_reduce %s of %lld elements "
                               "differs between ranks\n",
                       rank, type.name, (long long)count);
          ++failures;
          break;
        }
      // Reduce-scatter: world-size blocks of `count`, this rank's block of
      // the sum.
      std::vector<char> blocks(size_t(count) * worldSize * type.bytes);
      for (int64_t i = 0; i < count * worldSize; ++i)
        type.store(value(rank, i), blocks.data(), i);
      std::vector<char> got(size_t(count) * type.bytes);
      for (int64_t i = 0; i < count; ++i)
        type.orderedSum(worldSize, count, int64_t(rank) * count, i,
                        want.data());
      if (table->reduce_scatter_sum(table->self, blocks.data(), got.data(),
                                    count, type.dtype, nullptr) != 0 ||
          std::memcmp(got.data(), want.data(), got.size()) != 0) {
        std::fprintf(stderr, "rank %d: reduce_scatter %s of %lld elements is "
                             "not the rank-ordered sum\n",
                     rank, type.name, (long long)count);
        ++failures;
      }
      checked += 2;
    }
  }
  std::printf("rank %d of %d: %d of %d collectives are the rank-ordered sum, "
              "bit for bit\n",
              rank, worldSize, checked - failures, checked);
  return failures ? 1 : 0;
}
