//===- Nccl.cpp - the CUDA backend's ranks over NCCL ----------------------===//
//
// The CUDA backend's communicator. It starts as an mpi one (mpirun or srun
// launch it, MPI_COMM_WORLD numbers the ranks) and keeps it for the host-side
// collectives; over it, rank 0's NCCL unique id reaches every rank, which
// then makes its GPU current and joins one NCCL communicator. Started
// without a launcher it is one rank, whose host side is the local
// communicator: no MPI is initialized, and a build without MPI runs it.
// The step's collectives are NCCL's, enqueued on the stream the step
// passes, so they order with its kernels and the host does not wait for
// them. Start-up runs
// in phases every rank reports on (agree()), so a rank that cannot start
// makes all of them throw rather than leaving them waiting in NCCL for it.
//
// Without CUDA or NCCL at build time (ZTC_RUNTIME_NCCL unset) only
// makeNcclCommunicator exists, and it throws; without MPI it runs one rank,
// and a launch of several says MPI is missing.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "runtime/Error.h"

#if ZTC_RUNTIME_NCCL

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace ztc::rt {
namespace {

std::string cudaMessage(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" +
         cudaGetErrorString(status) + ")";
}

/// NCCL's text for `code`, and its detail on the last error when it has one
/// (on one line: the detail may end in a newline).
std::string ncclMessage(ncclResult_t code, ncclComm_t comm) {
  std::string text = ncclGetErrorString(code);
  const char *last = ncclGetLastError(comm);
  std::string detail = last ? last : "";
  while (!detail.empty() &&
         std::isspace(static_cast<unsigned char>(detail.back())))
    detail.pop_back();
  if (!detail.empty())
    text += " (" + printable(detail, 300) + ")";
  return text;
}

ncclDataType_t ncclType(int32_t dtype) {
  switch (dtype) {
  case ZTC_COMM_F64:
    return ncclFloat64;
  case ZTC_COMM_BF16:
    return ncclBfloat16;
  case ZTC_COMM_F16:
    return ncclFloat16;
  default:
    return ncclFloat32;
  }
}

/// This rank's index among the ranks of its node, as OpenMPI, Slurm or
/// MPICH's Hydra says it; 0 when no launcher does.
int localRank() {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char *value = std::getenv(name))
      return std::max(0, std::atoi(value));
  return 0;
}

/// Makes this rank's GPU current (its local rank modulo the node's devices,
/// so the ranks of a node spread over its GPUs). Returns why it cannot, or
/// "" when it could.
std::string selectDevice(int rank) {
  std::string who = "nccl: rank " + std::to_string(rank);
  std::string noDevice = who + " sees no CUDA device (cudaGetDeviceCount";
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess)
    return noDevice + ": " + cudaMessage(status) + ")";
  if (devices == 0)
    return noDevice + " found none)";
  int device = localRank() % devices;
  status = cudaSetDevice(device);
  if (status != cudaSuccess)
    return who + " cannot use CUDA device " + std::to_string(device) +
           " (cudaSetDevice: " + cudaMessage(status) + ")";
  return "";
}

/// One start-up phase, agreed by every rank: each sends its `failure` (""
/// for none) and its `payload` (the same size on every rank). Throws on
/// every rank when one failed (this rank's own message, else the first
/// failing rank's); otherwise returns rank 0's payload.
std::string agree(Communicator &host, const std::string &failure,
                  const std::string &payload) {
  // Messages are one line; a fixed size keeps every rank's record the same
  // length, as allGatherBytes requires.
  constexpr size_t kMessageBytes = 512;
  std::string mine = failure.substr(0, kMessageBytes);
  mine.resize(kMessageBytes, '\0');
  mine += payload;
  std::vector<std::string> all = host.allGatherBytes(mine);
  if (!failure.empty())
    throw Error(failure);
  for (const std::string &theirs : all)
    if (size_t length = strnlen(theirs.data(), kMessageBytes))
      throw Error(theirs.substr(0, length));
  return all.front().substr(kMessageBytes);
}

/// Whether NCCL's collectives can be captured into CUDA graphs: from 2.9,
/// in the library loaded (not the headers built against).
bool ncclCapturable() {
  int version = 0;
  return ncclGetVersion(&version) == ncclSuccess && version >= 20900;
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(std::unique_ptr<Communicator> host, ncclComm_t comm)
      : Communicator(host->rank(), host->worldSize()), host_(std::move(host)),
        comm_(comm), capturable_(ncclCapturable()) {}

  /// Before the host communicator (a member) finalizes MPI.
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }

  const char *kind() const override { return "nccl"; }

  // The host-side collectives are MPI's, with its watchdog (the local
  // communicator's for one rank started without a launcher).
  void allReduceSum(double *values, int64_t count) override {
    host_->allReduceSum(values, count);
  }
  std::vector<std::string> allGatherBytes(const std::string &bytes) override {
    return host_->allGatherBytes(bytes);
  }
  void barrier() override { host_->barrier(); }
  [[noreturn]] void abortAll(int status) override {
    host_->abortAll(status);
    std::_Exit(status); // a virtual call is not known not to return
  }
  void setTimeout(double seconds) override {
    Communicator::setTimeout(seconds);
    host_->setTimeout(seconds);
  }

  /// Asked of the library once, when the communicator starts.
  bool graphCapturable() const override { return capturable_; }

protected:
  int32_t allReduce(const void *send, void *recv, int64_t count, int32_t dtype,
                    void *stream) override {
    return record(ncclAllReduce(send, recv, size_t(count), ncclType(dtype),
                                ncclSum, comm_, cudaStream(stream)),
                  "ncclAllReduce");
  }

  int32_t reduceScatter(const void *send, void *recv, int64_t count,
                        int32_t dtype, void *stream) override {
    return record(ncclReduceScatter(send, recv, size_t(count), ncclType(dtype),
                                    ncclSum, comm_, cudaStream(stream)),
                  "ncclReduceScatter");
  }

  int32_t allGather(const void *send, void *recv, int64_t count, int32_t dtype,
                    void *stream) override {
    return record(ncclAllGather(send, recv, size_t(count), ncclType(dtype),
                                comm_, cudaStream(stream)),
                  "ncclAllGather");
  }

private:
  static cudaStream_t cudaStream(void *stream) {
    return static_cast<cudaStream_t>(stream);
  }

  int32_t record(ncclResult_t code, const char *call) {
    if (code == ncclSuccess)
      return 0;
    lastError_ = std::string(call) + " failed: " + ncclMessage(code, comm_);
    return int32_t(code);
  }

  std::unique_ptr<Communicator> host_;
  ncclComm_t comm_;
  const bool capturable_;
};

} // namespace

std::unique_ptr<Communicator> makeNcclCommunicator() {
  // One rank without a launcher needs no MPI to share the id.
  std::unique_ptr<Communicator> host =
      launchedByMpi() ? makeMpiCommunicator() : makeLocalCommunicator();
  int rank = host->rank();
  std::string onRank = " on rank " + std::to_string(rank) + ": ";

  // 1. Every rank has a GPU, and rank 0 an id: the id reaches every rank.
  std::string failure = selectDevice(rank);
  ncclUniqueId id{};
  if (rank == 0 && failure.empty())
    if (ncclResult_t code = ncclGetUniqueId(&id); code != ncclSuccess)
      failure =
          "nccl: ncclGetUniqueId failed" + onRank + ncclMessage(code, nullptr);
  std::string shared =
      agree(*host, failure,
            std::string(reinterpret_cast<const char *>(&id), sizeof id));
  std::memcpy(&id, shared.data(), sizeof id);

  // 2. Every rank joined NCCL: one that did not would leave the others'
  // first collective waiting forever.
  ncclComm_t comm = nullptr;
  failure.clear();
  if (ncclResult_t code = ncclCommInitRank(&comm, host->worldSize(), id, rank);
      code != ncclSuccess) {
    failure =
        "nccl: ncclCommInitRank failed" + onRank + ncclMessage(code, comm);
    if (comm)
      ncclCommAbort(comm);
    comm = nullptr;
  }
  try {
    agree(*host, failure, "");
  } catch (const Error &) {
    if (comm)
      ncclCommAbort(comm);
    throw;
  }
  return std::make_unique<NcclCommunicator>(std::move(host), comm);
}

} // namespace ztc::rt

#else

namespace ztc::rt {
std::unique_ptr<Communicator> makeNcclCommunicator() {
  throw Error("--comm nccl: this ztc-train was built without NCCL (needs the "
              "CUDA toolkit and its NCCL)");
}
} // namespace ztc::rt

#endif
