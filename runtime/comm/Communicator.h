//===- Communicator.h - the ranks a training run spans ----------*- C++ -*-===//
//
// What a step's collectives (the dist dialect) and the trainer run on. One
// process per rank; every rank runs the same program, so every rank calls
// the same collectives in the same order.
//
//   local  one rank, no MPI: a step compiled for one rank has no
//          collectives, and the host-side ones return their input;
//   mpi    real processes started by `mpirun -np N` (or `srun`), over
//          Debian's OpenMPI: the CPU backend's ranks;
//   nccl   the CUDA backend's ranks, launched as for mpi: each rank takes
//          one GPU of its node (its local rank modulo the node's devices)
//          and runs the step's collectives with NCCL, on the step's
//          stream; MPI starts NCCL and carries the host-side collectives.
//          Without a launcher it is one rank on the first GPU, and needs
//          no MPI.
//
// The step reaches a communicator through the C table of StepAbi.h
// (table()), so generated code links no MPI or NCCL. The trainer uses the
// host-side collectives below (the loss of a report, the start-up
// agreement).
//
// Every collective counts the elements this rank moves, as a
// bandwidth-optimal ring does and the ZeRO paper counts them: an all-reduce
// of n elements moves 2n(N-1)/N, a reduce-scatter from n elements and an
// all-gather to n elements move n(N-1)/N each.
//
// Order: mpi adds in rank order, ((r0 + r1) + r2) + ..., whatever the
// message size, so N ranks compute bit for bit what one rank accumulating
// the ranks' micro-batches in turn does (--grad-accum N), and every rank
// holds the same sum. Half types: mpi sums them in fp32 and rounds once, as
// StepAbi.h says; nccl sums as NCCL does, in the order of its ring or tree
// and rounding at each hop, so its results may differ from mpi's in the
// last bits.
//
// A collective that waits longer than the timeout (a rank died or stalled)
// ends this process with exit status 1 and a message naming the collective
// and the time waited: the launcher then stops the others, and no rank
// hangs. On nccl this holds for the host-side collectives only: the step's
// collectives enqueue work on the stream and return, and NCCL has no
// timeout, so a rank that stalls inside a step leaves the others waiting on
// the device.
//
// Errors (ztc::rt::Error):
//   --comm mpi: this ztc-train was built without MPI
//   --comm nccl: this ztc-train was built without NCCL (needs ...)
//   unknown communicator 'x' (expected auto, local, mpi or nccl)
//   mpi: MPI_Allreduce failed: <MPI's message>
//   nccl: rank 1 sees no CUDA device (cudaGetDeviceCount: <CUDA's message>)
//   nccl: rank 1 cannot use CUDA device 1 (cudaSetDevice: <CUDA's message>)
//   nccl: ncclGetUniqueId failed on rank 0: <NCCL's message>
//   nccl: ncclCommInitRank failed on rank 1: <NCCL's message>
// nccl's start-up is agreed: when one rank fails, every rank throws (the
// failing one its own message, the others the first failing rank's), so
// none waits for it. A failed step collective returns its MPI or NCCL code
// to the step, and lastError() says "ncclAllReduce failed: <NCCL's
// message>" (or the MPI call's).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_COMM_COMMUNICATOR_H
#define ZTC_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/kernels/StepAbi.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ztc::rt {

class Communicator {
public:
  virtual ~Communicator();

  /// "local", "mpi" or "nccl".
  virtual const char *kind() const = 0;
  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }
  /// The table a step context points at; null for one local rank.
  const ztc_comm *table() const { return worldSize_ > 1 ? &table_ : nullptr; }

  /// In place: values[i] = the sum over ranks (the reported loss).
  virtual void allReduceSum(double *values, int64_t count) = 0;
  /// Every rank's `bytes` (the same length everywhere), in rank order.
  virtual std::vector<std::string> allGatherBytes(const std::string &bytes) = 0;
  /// Every rank's `text` (any length up to 1024 bytes, the rest cut; no
  /// NUL bytes), in rank order: outcomes and figures ranks agree on.
  std::vector<std::string> allGatherText(const std::string &text);
  /// Waits for every rank.
  virtual void barrier() = 0;
  /// Ends every rank's process with `status` (after an error on this one,
  /// so the others do not wait for it forever).
  [[noreturn]] virtual void abortAll(int status) = 0;

  /// Elements this rank sent by the step's collectives since the start.
  uint64_t elementsMoved() const { return elementsMoved_; }
  /// Adds `elements` to elementsMoved: those a replayed record of a step
  /// sent without running the collectives' host code, or (negative) those
  /// a failed recording counted without sending them (Runner::run).
  void adjustMoved(int64_t elements) {
    elementsMoved_ = uint64_t(int64_t(elementsMoved_) + elements);
  }
  /// What the last failed collective reported.
  const std::string &lastError() const { return lastError_; }

  /// Seconds a collective may wait before the process ends (0: forever).
  virtual void setTimeout(double seconds) { timeoutSeconds_ = seconds; }

  /// Whether a step's collectives may be recorded into a CUDA graph and
  /// replayed (Backend::replay): NCCL's from version 2.9. A replay runs
  /// the collectives' device work but not the host code of the table's
  /// functions: the Runner counts what the recorded call moved again for
  /// each replay (adjustMoved), and a collective that fails in a replay
  /// fails on the device, reported when the host next waits, as an
  /// asynchronous NCCL error of a direct call is. MPI's collectives are
  /// host code, which a record cannot hold.
  virtual bool graphCapturable() const { return false; }

protected:
  Communicator(int rank, int worldSize);

  /// The step's collectives, in the table's convention (StepAbi.h):
  /// `stream` is the step's cudaStream_t on CUDA, null on the CPU.
  virtual int32_t allReduce(const void *send, void *recv, int64_t count,
                            int32_t dtype, void *stream) = 0;
  virtual int32_t reduceScatter(const void *send, void *recv, int64_t count,
                                int32_t dtype, void *stream) = 0;
  virtual int32_t allGather(const void *send, void *recv, int64_t count,
                            int32_t dtype, void *stream) = 0;

  int rank_, worldSize_;
  double timeoutSeconds_ = 60;
  std::string lastError_;
  uint64_t elementsMoved_ = 0;

private:
  static int32_t allReduceEntry(void *self, const void *send, void *recv,
                                int64_t count, int32_t dtype, void *stream);
  static int32_t reduceScatterEntry(void *self, const void *send, void *recv,
                                    int64_t count, int32_t dtype, void *stream);
  static int32_t allGatherEntry(void *self, const void *send, void *recv,
                                int64_t count, int32_t dtype, void *stream);

  ztc_comm table_{};
};

/// One rank, no MPI.
std::unique_ptr<Communicator> makeLocalCommunicator();

/// The ranks `mpirun` or `srun` started; MPI is initialized on first use
/// and finalized at exit. Throws when ztc was built without MPI.
std::unique_ptr<Communicator> makeMpiCommunicator();

/// How long MPI's start-up may wait for every rank to join (0: for ever,
/// the default): past it, a rank prints which it is and exits 1, so that a
/// rank that exited before joining does not leave the others waiting.
/// ztc-train sets it to --collective-timeout.
void setJoinTimeout(double seconds);

/// The ranks `mpirun` or `srun` started, each on one GPU of its node (its
/// local rank, from OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or
/// MPI_LOCALRANKID, modulo the node's devices), which it makes current; the
/// step's collectives run with NCCL on the step's stream, the host-side ones
/// over the MPI communicator that started NCCL. Without a launcher: one
/// rank, started without MPI. Throws when ztc was built without CUDA or
/// NCCL (or without MPI, for several ranks), and on every rank when one has
/// no device or NCCL fails to start.
std::unique_ptr<Communicator> makeNcclCommunicator();

/// Whether this process was started by an MPI launcher (OpenMPI's mpirun,
/// a PMI or PMIx launcher such as srun) with more than one rank.
bool launchedByMpi();

/// `kind`: "auto" (mpi when launchedByMpi(), else local), "local", "mpi" or
/// "nccl".
std::unique_ptr<Communicator> makeCommunicator(const std::string &kind);

/// The bytes of one element of a ztc_comm dtype.
size_t commElementBytes(int32_t dtype);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_COMM_COMMUNICATOR_H
