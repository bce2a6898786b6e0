//===- Communicator.h - the ranks a training run spans ----------*- C++ -*-===//
//
// What a step's collectives (the dist dialect) and the trainer run on. One
// process per rank; every rank runs the same program, so every rank calls
// the same collectives in the same order.
//
//   local  one rank, no MPI: a step compiled for one rank has no
//          collectives, and the host-side ones return their input;
//   mpi    real processes started by `mpirun -np N` (or `srun`), over
//          Debian's OpenMPI: the CPU backend's ranks.
//
// The step reaches a communicator through the C table of StepAbi.h
// (table()), so generated code links no MPI. The trainer uses the host-side
// collectives below (the loss of a report, the start-up agreement).
//
// Every collective counts the elements this rank moves, as a
// bandwidth-optimal ring does and the ZeRO paper counts them: an all-reduce
// of n elements moves 2n(N-1)/N, a reduce-scatter from n elements and an
// all-gather to n elements move n(N-1)/N each.
//
// A collective that waits longer than the timeout (a rank died or stalled)
// ends this process with exit status 1 and a message naming the collective
// and the time waited: the launcher then stops the others, and no rank
// hangs.
//
// Errors (ztc::rt::Error):
//   --comm mpi: this ztc-train was built without MPI
//   unknown communicator 'x' (expected auto, local or mpi)
//   mpi: MPI_Allreduce failed: <MPI's message>
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

  /// "local" or "mpi".
  virtual const char *kind() const = 0;
  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }
  /// The table a step context points at; null for one local rank.
  const ztc_comm *table() const { return worldSize_ > 1 ? &table_ : nullptr; }

  /// In place: values[i] = the sum over ranks (the reported loss).
  virtual void allReduceSum(double *values, int64_t count) = 0;
  /// Every rank's `bytes` (the same length everywhere), in rank order.
  virtual std::vector<std::string> allGatherBytes(const std::string &bytes) = 0;
  /// Waits for every rank.
  virtual void barrier() = 0;
  /// Ends every rank's process with `status` (after an error on this one,
  /// so the others do not wait for it forever).
  [[noreturn]] virtual void abortAll(int status) = 0;

  /// Elements this rank sent by the step's collectives since the start.
  uint64_t elementsMoved() const { return elementsMoved_; }
  /// What the last failed collective reported.
  const std::string &lastError() const { return lastError_; }

  /// Seconds a collective may wait before the process ends (0: forever).
  void setTimeout(double seconds) { timeoutSeconds_ = seconds; }

protected:
  Communicator(int rank, int worldSize);

  /// The step's collectives, in the table's convention (StepAbi.h).
  virtual int32_t allReduce(const void *send, void *recv, int64_t count,
                            int32_t dtype) = 0;
  virtual int32_t reduceScatter(const void *send, void *recv, int64_t count,
                                int32_t dtype) = 0;
  virtual int32_t allGather(const void *send, void *recv, int64_t count,
                            int32_t dtype) = 0;

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

/// Whether this process was started by an MPI launcher (OpenMPI's mpirun,
/// a PMI or PMIx launcher such as srun) with more than one rank.
bool launchedByMpi();

/// `kind`: "auto" (mpi when launchedByMpi(), else local), "local" or "mpi".
std::unique_ptr<Communicator> makeCommunicator(const std::string &kind);

/// The bytes of one element of a ztc_comm dtype.
size_t commElementBytes(int32_t dtype);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_COMM_COMMUNICATOR_H
