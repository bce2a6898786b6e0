//===- Communicator.cpp - the local communicator and the factory ---------===//

#include "runtime/comm/Communicator.h"

#include "runtime/Error.h"

#include <algorithm>

#include <cstdlib>
#include <cstring>

namespace ztc::rt {

Communicator::Communicator(int rank, int worldSize)
    : rank_(rank), worldSize_(worldSize) {
  table_.self = this;
  table_.all_reduce_sum = &Communicator::allReduceEntry;
  table_.reduce_scatter_sum = &Communicator::reduceScatterEntry;
  table_.all_gather = &Communicator::allGatherEntry;
}

Communicator::~Communicator() = default;

// The table's entries: count what a ring moves, then run the collective.
// The stream is the CPU's null, which local and mpi ignore; nccl orders the
// collective on it.

int32_t Communicator::allReduceEntry(void *self, const void *send, void *recv,
                                     int64_t count, int32_t dtype,
                                     void *stream) {
  auto *comm = static_cast<Communicator *>(self);
  uint64_t n = comm->worldSize_;
  comm->elementsMoved_ += 2 * (uint64_t(count) * (n - 1) / n);
  return comm->allReduce(send, recv, count, dtype, stream);
}

int32_t Communicator::reduceScatterEntry(void *self, const void *send,
                                         void *recv, int64_t count,
                                         int32_t dtype, void *stream) {
  auto *comm = static_cast<Communicator *>(self);
  comm->elementsMoved_ += uint64_t(count) * (comm->worldSize_ - 1);
  return comm->reduceScatter(send, recv, count, dtype, stream);
}

int32_t Communicator::allGatherEntry(void *self, const void *send, void *recv,
                                     int64_t count, int32_t dtype,
                                     void *stream) {
  auto *comm = static_cast<Communicator *>(self);
  comm->elementsMoved_ += uint64_t(count) * (comm->worldSize_ - 1);
  return comm->allGather(send, recv, count, dtype, stream);
}

std::vector<std::string> Communicator::allGatherText(const std::string &text) {
  constexpr size_t kBytes = 1024;
  std::string padded = text.substr(0, kBytes);
  padded.resize(kBytes, '\0');
  std::vector<std::string> all = allGatherBytes(padded);
  for (std::string &one : all)
    one.resize(std::min(one.find('\0'), one.size()));
  return all;
}

size_t commElementBytes(int32_t dtype) {
  switch (dtype) {
  case ZTC_COMM_F64:
    return 8;
  case ZTC_COMM_BF16:
  case ZTC_COMM_F16:
    return 2;
  default:
    return 4;
  }
}

namespace {

/// One rank: every collective is the identity.
class LocalCommunicator final : public Communicator {
public:
  LocalCommunicator() : Communicator(0, 1) {}
  const char *kind() const override { return "local"; }
  void allReduceSum(double *, int64_t) override {}
  std::vector<std::string> allGatherBytes(const std::string &bytes) override {
    return {bytes};
  }
  void barrier() override {}
  [[noreturn]] void abortAll(int status) override { std::exit(status); }

protected:
  int32_t allReduce(const void *send, void *recv, int64_t count, int32_t dtype,
                    void *) override {
    if (send != recv)
      std::memcpy(recv, send, count * commElementBytes(dtype));
    return 0;
  }
  int32_t reduceScatter(const void *send, void *recv, int64_t count,
                        int32_t dtype, void *stream) override {
    return allReduce(send, recv, count, dtype, stream);
  }
  int32_t allGather(const void *send, void *recv, int64_t count, int32_t dtype,
                    void *stream) override {
    return allReduce(send, recv, count, dtype, stream);
  }
};

} // namespace

std::unique_ptr<Communicator> makeLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

bool launchedByMpi() {
  for (const char *name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    const char *value = std::getenv(name);
    if (value && std::atoi(value) > 1)
      return true;
  }
  // srun with PMIx sets PMIX_RANK but not always a size.
  const char *tasks = std::getenv("SLURM_NTASKS");
  return std::getenv("PMIX_RANK") && tasks && std::atoi(tasks) > 1;
}

std::unique_ptr<Communicator> makeCommunicator(const std::string &kind) {
  if (kind == "local")
    return makeLocalCommunicator();
  if (kind == "mpi")
    return makeMpiCommunicator();
  if (kind == "nccl")
    return makeNcclCommunicator();
  if (kind == "auto")
    return launchedByMpi() ? makeMpiCommunicator() : makeLocalCommunicator();
  throw Error("unknown communicator '" + printable(kind) +
              "' (expected auto, local, mpi or nccl)");
}

} // namespace ztc::rt
