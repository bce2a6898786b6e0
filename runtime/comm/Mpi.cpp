//===- Mpi.cpp - the ranks of an MPI launch -------------------------------===//
//
// The CPU backend's communicator: one process per rank, started by mpirun
// or srun, over MPI_COMM_WORLD. Reductions add in rank order, not in
// whatever order MPI's algorithm for the message size picks: each rank
// receives its block from every rank and adds them from rank 0 up. N ranks
// then compute bit for bit what one rank accumulating the same
// micro-batches in that order does, and every rank holds the same result.
// Half types are widened to fp32, summed, and rounded once.
//
// A watchdog thread ends a rank whose collective waits past
// --collective-timeout. To name the rank that stalled or died, every rank
// keeps two numbers in memory shared by the ranks of its node
// (MPI_Win_allocate_shared): the collectives it has entered, and a
// heartbeat its watchdog writes every 200 ms. The watchdog reads the
// others' with plain loads, no MPI call, so even a stopped rank's are
// there: a rank whose heartbeat is stale is stopped or dead, and a rank
// whose count is below this one's has not reached the collective.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "runtime/Error.h"

#if ZTC_RUNTIME_MPI

#include "runtime/kernels/Half.h"

// The C API only: OpenMPI's deprecated C++ bindings need a library we do
// not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace ztc::rt {
namespace {

std::string mpiMessage(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "error " + std::to_string(code);
  return std::string(text, length);
}

MPI_Datatype nativeType(int32_t dtype) {
  return dtype == ZTC_COMM_F64 ? MPI_DOUBLE : MPI_FLOAT;
}

bool isHalf(int32_t dtype) {
  return dtype == ZTC_COMM_BF16 || dtype == ZTC_COMM_F16;
}

float halfToFloat(uint16_t bits, int32_t dtype) {
  return dtype == ZTC_COMM_BF16 ? half_detail::bfloat16BitsToFloat(bits)
                                : half_detail::halfBitsToFloat(bits);
}

uint16_t floatToHalf(float value, int32_t dtype) {
  return dtype == ZTC_COMM_BF16 ? half_detail::floatToBFloat16Bits(value)
                                : half_detail::floatToHalfBits(value);
}

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(int rank, int worldSize) : Communicator(rank, worldSize) {
    shareProgress();
    watchdog_ = std::thread([this] { watch(); });
  }

  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    if (window_ != MPI_WIN_NULL)
      MPI_Win_free(&window_);
    if (node_ != MPI_COMM_NULL)
      MPI_Comm_free(&node_);
    MPI_Finalize();
  }

  const char *kind() const override { return "mpi"; }

  void allReduceSum(double *values, int64_t count) override {
    Watch watch(this, "the loss all-reduce");
    check(MPI_Allreduce(MPI_IN_PLACE, values, int(count), MPI_DOUBLE, MPI_SUM,
                        MPI_COMM_WORLD),
          "MPI_Allreduce");
  }

  std::vector<std::string> allGatherBytes(const std::string &bytes) override {
    Watch watch(this, "the start-up agreement");
    std::string all(bytes.size() * worldSize_, '\0');
    check(MPI_Allgather(bytes.data(), int(bytes.size()), MPI_BYTE, all.data(),
                        int(bytes.size()), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgather");
    std::vector<std::string> out;
    for (int r = 0; r < worldSize_; ++r)
      out.push_back(all.substr(r * bytes.size(), bytes.size()));
    return out;
  }

  void barrier() override {
    Watch watch(this, "a barrier");
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  }

  [[noreturn]] void abortAll(int status) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, status);
    std::_Exit(status);
  }

protected:
  int32_t allReduce(const void *send, void *recv, int64_t count, int32_t dtype,
                    void *) override {
    Watch watch(this, "all_reduce");
    // A reduce-scatter over blocks of ceil(count / N), padded, then an
    // all-gather of the sums: the volume of a ring, the rank-ordered sum.
    int64_t block = (count + worldSize_ - 1) / worldSize_;
    size_t bytes = commElementBytes(dtype);
    padded_.assign(size_t(block) * worldSize_ * bytes, 0);
    std::memcpy(padded_.data(), send, size_t(count) * bytes);
    ownSum_.resize(size_t(block) * bytes);
    if (int32_t code =
            sumInRankOrder(padded_.data(), ownSum_.data(), block, dtype))
      return code;
    // The padded buffer has been sent: it receives the sums.
    MPI_Datatype type = elementType(dtype);
    if (int code =
            MPI_Allgather(ownSum_.data(), int(block), type, padded_.data(),
                          int(block), type, MPI_COMM_WORLD))
      return record(code, "MPI_Allgather");
    std::memcpy(recv, padded_.data(), size_t(count) * bytes);
    return 0;
  }

  int32_t reduceScatter(const void *send, void *recv, int64_t count,
                        int32_t dtype, void *) override {
    Watch watch(this, "reduce_scatter");
    return sumInRankOrder(send, recv, count, dtype);
  }

  int32_t allGather(const void *send, void *recv, int64_t count, int32_t dtype,
                    void *) override {
    Watch watch(this, "all_gather");
    int bytes = int(count * commElementBytes(dtype));
    return record(MPI_Allgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE,
                                MPI_COMM_WORLD),
                  "MPI_Allgather");
  }

private:
  /// Marks this rank as waiting in `what` for as long as it lives, and
  /// counts the collective in the node's shared progress.
  struct Watch {
    Watch(MpiCommunicator *comm, const char *what) : comm(comm) {
      if (comm->mine_)
        __atomic_add_fetch(&comm->mine_->entered, 1, __ATOMIC_RELEASE);
      std::lock_guard<std::mutex> lock(comm->mutex_);
      comm->waitingIn_ = what;
      comm->since_ = std::chrono::steady_clock::now();
    }
    ~Watch() {
      std::lock_guard<std::mutex> lock(comm->mutex_);
      comm->waitingIn_ = nullptr;
    }
    MpiCommunicator *comm;
  };

  /// The watchdog: ends the process when one collective waits too long.
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(200));
      if (mine_)
        __atomic_store_n(&mine_->heartbeat, nowNanoseconds(), __ATOMIC_RELEASE);
      if (!waitingIn_ || timeoutSeconds_ <= 0)
        continue;
      double waited = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - since_)
                          .count();
      if (waited < timeoutSeconds_)
        continue;
      std::fprintf(stderr,
                   "error: rank %d of %d: %s has waited %.0f s for the other "
                   "ranks (--collective-timeout %g): %s\n",
                   rank_, worldSize_, waitingIn_, waited, timeoutSeconds_,
                   whoIsBehind().c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

  /// Sets up the shared progress counts; without them (an MPI that cannot
  /// share memory) the watchdog still ends the rank, naming no other.
  void shareProgress() {
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_,
                            MPI_INFO_NULL, &node_) != MPI_SUCCESS) {
      node_ = MPI_COMM_NULL;
      return;
    }
    void *base = nullptr;
    if (MPI_Win_allocate_shared(sizeof(Progress), sizeof(Progress),
                                MPI_INFO_NULL, node_, &base,
                                &window_) != MPI_SUCCESS) {
      window_ = MPI_WIN_NULL;
      return;
    }
    int nodeSize = 1;
    MPI_Comm_size(node_, &nodeSize);
    MPI_Group worldGroup, nodeGroup;
    MPI_Comm_group(MPI_COMM_WORLD, &worldGroup);
    MPI_Comm_group(node_, &nodeGroup);
    std::vector<int> local(nodeSize), world(nodeSize);
    std::iota(local.begin(), local.end(), 0);
    MPI_Group_translate_ranks(nodeGroup, nodeSize, local.data(), worldGroup,
                              world.data());
    MPI_Group_free(&worldGroup);
    MPI_Group_free(&nodeGroup);
    mine_ = static_cast<Progress *>(base);
    __atomic_store_n(&mine_->entered, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&mine_->heartbeat, nowNanoseconds(), __ATOMIC_RELEASE);
    for (int r = 0; r < nodeSize; ++r) {
      MPI_Aint size = 0;
      int unit = 0;
      void *count = nullptr;
      if (MPI_Win_shared_query(window_, r, &size, &unit, &count) ==
              MPI_SUCCESS &&
          count && world[r] != rank_)
        peers_.push_back({world[r], static_cast<const Progress *>(count)});
    }
    // Every count is 0 before any rank counts a collective.
    MPI_Barrier(node_);
  }

  /// The watchdog's diagnosis: which ranks are silent (stopped or dead),
  /// else which have not reached the collective this one waits in.
  std::string whoIsBehind() const {
    if (!mine_)
      return "a rank died, stalled or runs another program";
    int64_t now = nowNanoseconds();
    std::string silent;
    for (const Peer &peer : peers_) {
      double age = double(now - __atomic_load_n(&peer.progress->heartbeat,
                                                __ATOMIC_ACQUIRE)) /
                   1e9;
      if (age < 2.0)
        continue;
      silent += (silent.empty() ? "" : ", ") + std::string("rank ") +
                std::to_string(peer.rank) + " (silent for " +
                std::to_string(int64_t(age)) + " s)";
    }
    if (!silent.empty())
      return silent + " stopped or died";
    int64_t own = __atomic_load_n(&mine_->entered, __ATOMIC_ACQUIRE);
    std::string behind;
    for (const Peer &peer : peers_) {
      int64_t theirs =
          __atomic_load_n(&peer.progress->entered, __ATOMIC_ACQUIRE);
      if (theirs >= own)
        continue;
      behind += (behind.empty() ? "" : ", ") + std::string("rank ") +
                std::to_string(peer.rank) + " (at collective " +
                std::to_string(theirs) + ")";
    }
    if (!behind.empty())
      return behind + " has not reached it, this rank's collective " +
             std::to_string(own) + ": it is stuck elsewhere";
    if (int(peers_.size()) + 1 < worldSize_)
      return "every rank on this node reached it: a rank on another node "
             "died, stalled or runs another program";
    return "every rank reached it: a rank died in it, or runs another "
           "program";
  }

  static int64_t nowNanoseconds() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void check(int code, const char *call) {
    if (code != MPI_SUCCESS)
      throw Error("mpi: " + std::string(call) + " failed: " + mpiMessage(code));
  }

  int32_t record(int code, const char *call) {
    if (code == MPI_SUCCESS)
      return 0;
    lastError_ = std::string(call) + " failed: " + mpiMessage(code);
    return code;
  }

  static MPI_Datatype elementType(int32_t dtype) {
    return isHalf(dtype) ? MPI_UINT16_T : nativeType(dtype);
  }

  /// The reduce-scatter: `send` holds N blocks of `count` elements, rank
  /// r's block r of every rank reaches it (MPI_Alltoall, each rank sending
  /// (N-1)/N of its buffer as a ring would), and it adds them in rank
  /// order, so every element is ((b0 + b1) + b2) + ... whatever algorithm
  /// MPI picks: the sum one rank accumulating the ranks' micro-batches in
  /// turn computes. Half types add in fp32 and round once.
  int32_t sumInRankOrder(const void *send, void *recv, int64_t count,
                         int32_t dtype) {
    size_t bytes = commElementBytes(dtype);
    std::vector<char> &blocks = received_;
    blocks.resize(size_t(count) * worldSize_ * bytes);
    MPI_Datatype type = elementType(dtype);
    if (int code = MPI_Alltoall(send, int(count), type, blocks.data(),
                                int(count), type, MPI_COMM_WORLD))
      return record(code, "MPI_Alltoall");
    if (dtype == ZTC_COMM_F64) {
      addBlocks(reinterpret_cast<const double *>(blocks.data()),
                static_cast<double *>(recv), count);
    } else if (dtype == ZTC_COMM_F32) {
      addBlocks(reinterpret_cast<const float *>(blocks.data()),
                static_cast<float *>(recv), count);
    } else {
      std::vector<float> wide = widen(blocks.data(), count * worldSize_, dtype);
      std::vector<float> sum(count);
      addBlocks(wide.data(), sum.data(), count);
      narrow(sum, recv, dtype);
    }
    return 0;
  }

  template <typename T>
  void addBlocks(const T *blocks, T *sum, int64_t count) const {
    std::copy(blocks, blocks + count, sum);
    for (int r = 1; r < worldSize_; ++r) {
      const T *block = blocks + size_t(r) * count;
      for (int64_t i = 0; i < count; ++i)
        sum[i] += block[i];
    }
  }

  static std::vector<float> widen(const void *data, int64_t count,
                                  int32_t dtype) {
    std::vector<float> wide(count);
    const auto *bits = static_cast<const uint16_t *>(data);
    for (int64_t i = 0; i < count; ++i)
      wide[i] = halfToFloat(bits[i], dtype);
    return wide;
  }

  static void narrow(const std::vector<float> &wide, void *data,
                     int32_t dtype) {
    auto *bits = static_cast<uint16_t *>(data);
    for (size_t i = 0; i < wide.size(); ++i)
      bits[i] = floatToHalf(wide[i], dtype);
  }

  /// A rank's slot of the node's shared progress.
  struct Progress {
    /// Collectives entered.
    int64_t entered;
    /// The watchdog's last wake-up (steady clock, ns: one clock for every
    /// process of the machine).
    int64_t heartbeat;
  };
  struct Peer {
    int rank;
    const Progress *progress;
  };
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  Progress *mine_ = nullptr;
  std::vector<Peer> peers_;

  /// Scratch the step's collectives reuse (they run one at a time, on the
  /// thread that calls the step): the padded all-reduce buffer, this
  /// rank's block of its sum, and every rank's blocks as received.
  std::vector<char> padded_, ownSum_, received_;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  const char *waitingIn_ = nullptr;
  std::chrono::steady_clock::time_point since_;
  std::thread watchdog_;
};

/// The launcher's word for this process's rank and the world size, from
/// the environment (MPI is not up yet): "?" when it does not say.
std::string launcherVariable(std::initializer_list<const char *> names) {
  for (const char *name : names)
    if (const char *value = std::getenv(name))
      return value;
  return "?";
}

/// Ends this rank when MPI_Init does not return within `seconds`: a rank
/// that exited or stalled before joining leaves the others waiting in it
/// for ever (OpenMPI's start-up exchange), and no collective timeout
/// covers it. The exit makes the launcher end the job.
class JoinWatch {
public:
  explicit JoinWatch(double seconds) {
    if (seconds <= 0)
      return;
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (joined_.wait_for(lock, std::chrono::duration<double>(seconds),
                           [this] { return done_; }))
        return;
      std::fprintf(
          stderr,
          "error: rank %s of %s: the ranks did not all start MPI within %g s "
          "(--collective-timeout): another rank exited or stalled before "
          "joining\n",
          launcherVariable(
              {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
              .c_str(),
          launcherVariable({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
              .c_str(),
          seconds);
      std::fflush(stderr);
      std::_Exit(1);
    });
  }
  ~JoinWatch() {
    if (!thread_.joinable())
      return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    joined_.notify_all();
    thread_.join();
  }

private:
  std::mutex mutex_;
  std::condition_variable joined_;
  bool done_ = false;
  std::thread thread_;
};

double joinTimeoutSeconds = 0;

} // namespace

void setJoinTimeout(double seconds) { joinTimeoutSeconds = seconds; }

std::unique_ptr<Communicator> makeMpiCommunicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Collectives run on the step's communication thread (HostStreams),
    // the trainer's between steps on the main one: never two at once.
    int provided = 0;
    JoinWatch watch(joinTimeoutSeconds);
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS)
      throw Error("mpi: MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED)
      throw Error("mpi: this MPI library cannot be called from more than one "
                  "thread (it provides thread level " +
                  std::to_string(provided) +
                  ", ztc needs MPI_THREAD_SERIALIZED)");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::make_unique<MpiCommunicator>(rank, size);
}

} // namespace ztc::rt

#else

namespace ztc::rt {
std::unique_ptr<Communicator> makeMpiCommunicator() {
  throw Error("--comm mpi: this ztc-train was built without MPI "
              "(install libopenmpi-dev and rebuild)");
}
void setJoinTimeout(double) {}
} // namespace ztc::rt

#endif
