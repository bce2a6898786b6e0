//===- CommunicatorTest.cpp - the communicators of one process ------------===//
//
// What one process can check of runtime/comm: the local communicator, the
// table entries a step calls (a recording communicator stands in for a
// world of four ranks), the factory's kinds, and the nccl communicator's
// start-up without a GPU. The nccl test starts MPI as a singleton (no
// mpirun needed); with a GPU it gets a one-rank NCCL communicator instead.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "runtime/Error.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

using namespace ztc::rt;

namespace {

/// Four ranks that record what the table entries pass on.
class RecordingCommunicator final : public Communicator {
public:
  struct Call {
    const char *what;
    const void *send;
    void *recv;
    int64_t count;
    int32_t dtype;
    void *stream;
  };

  RecordingCommunicator() : Communicator(1, 4) {}
  const char *kind() const override { return "recording"; }
  void allReduceSum(double *, int64_t) override {}
  std::vector<std::string> allGatherBytes(const std::string &bytes) override {
    return {bytes};
  }
  void barrier() override {}
  [[noreturn]] void abortAll(int status) override { std::exit(status); }

  std::vector<Call> calls;

protected:
  int32_t allReduce(const void *send, void *recv, int64_t count, int32_t dtype,
                    void *stream) override {
    calls.push_back({"all_reduce", send, recv, count, dtype, stream});
    return 0;
  }
  int32_t reduceScatter(const void *send, void *recv, int64_t count,
                        int32_t dtype, void *stream) override {
    calls.push_back({"reduce_scatter", send, recv, count, dtype, stream});
    return 0;
  }
  int32_t allGather(const void *send, void *recv, int64_t count, int32_t dtype,
                    void *stream) override {
    calls.push_back({"all_gather", send, recv, count, dtype, stream});
    // An error code goes back to the step unchanged.
    lastError_ = "all_gather failed";
    return 7;
  }
};

/// The message of the Error `make` throws, or "" (and a failure) if none.
template <typename Make> std::string errorOf(Make make) {
  try {
    make();
  } catch (const Error &error) {
    return error.what();
  }
  ADD_FAILURE() << "no Error thrown";
  return "";
}

bool startsWith(const std::string &text, const std::string &prefix) {
  return text.rfind(prefix, 0) == 0;
}

} // namespace

TEST(CommunicatorTest, LocalIsOneRankWhoseCollectivesAreIdentities) {
  std::unique_ptr<Communicator> comm = makeCommunicator("local");
  EXPECT_STREQ(comm->kind(), "local");
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->worldSize(), 1);
  // A one-rank step has no collectives: its context gets no table.
  EXPECT_EQ(comm->table(), nullptr);

  std::vector<double> values = {1.5, -2.0, 3.25};
  comm->allReduceSum(values.data(), int64_t(values.size()));
  EXPECT_EQ(values, (std::vector<double>{1.5, -2.0, 3.25}));
  EXPECT_EQ(comm->allGatherBytes(std::string("a\0b", 3)),
            (std::vector<std::string>{std::string("a\0b", 3)}));
  comm->barrier();
  comm->setTimeout(5);
  EXPECT_EQ(comm->elementsMoved(), 0u);
  EXPECT_EQ(comm->lastError(), "");
}

TEST(CommunicatorTest, TableEntriesPassTheStreamAndCountARing) {
  RecordingCommunicator comm;
  const ztc_comm *table = comm.table();
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->self, &comm);
  float send[1000] = {}, recv[1000] = {};
  int streamA = 0, streamB = 0;

  EXPECT_EQ(table->all_reduce_sum(table->self, send, recv, 1000, ZTC_COMM_F32,
                                  &streamA),
            0);
  // 2n(N-1)/N for n = 1000, N = 4.
  EXPECT_EQ(comm.elementsMoved(), 1500u);
  EXPECT_EQ(table->reduce_scatter_sum(table->self, send, recv, 250,
                                      ZTC_COMM_BF16, &streamB),
            0);
  // A reduce-scatter to 250 from n = 1000: n(N-1)/N = 750.
  EXPECT_EQ(comm.elementsMoved(), 2250u);
  EXPECT_EQ(
      table->all_gather(table->self, send, recv, 250, ZTC_COMM_F64, nullptr),
      7);
  EXPECT_EQ(comm.elementsMoved(), 3000u);
  EXPECT_EQ(comm.lastError(), "all_gather failed");

  ASSERT_EQ(comm.calls.size(), 3u);
  EXPECT_STREQ(comm.calls[0].what, "all_reduce");
  EXPECT_EQ(comm.calls[0].send, send);
  EXPECT_EQ(comm.calls[0].recv, recv);
  EXPECT_EQ(comm.calls[0].count, 1000);
  EXPECT_EQ(comm.calls[0].dtype, ZTC_COMM_F32);
  EXPECT_EQ(comm.calls[0].stream, &streamA);
  EXPECT_STREQ(comm.calls[1].what, "reduce_scatter");
  EXPECT_EQ(comm.calls[1].count, 250);
  EXPECT_EQ(comm.calls[1].dtype, ZTC_COMM_BF16);
  EXPECT_EQ(comm.calls[1].stream, &streamB);
  EXPECT_STREQ(comm.calls[2].what, "all_gather");
  EXPECT_EQ(comm.calls[2].dtype, ZTC_COMM_F64);
  EXPECT_EQ(comm.calls[2].stream, nullptr);
}

TEST(CommunicatorTest, UnknownKindNamesTheKinds) {
  EXPECT_EQ(errorOf([] { makeCommunicator("bogus"); }),
            "unknown communicator 'bogus' (expected auto, local, mpi or nccl)");
  // The kind comes from the command line: printed on one line.
  EXPECT_EQ(errorOf([] { makeCommunicator("nc\ncl"); }),
            "unknown communicator 'nc\\x0acl' (expected auto, local, mpi or "
            "nccl)");
}

// Without a GPU (this project's build machines) the nccl communicator
// fails at start-up with a one-line message naming the rank and the
// problem; built without NCCL it says so. With a GPU, a run without a
// launcher is one rank on device 0, and starts no MPI (so the leak checker
// of the sanitizer build runs this test too).
TEST(CommunicatorTest, NcclWithoutAGpuIsAClearError) {
  std::unique_ptr<Communicator> comm;
  std::string message;
  try {
    comm = makeCommunicator("nccl");
  } catch (const Error &error) {
    message = error.what();
  }
  if (comm) {
    EXPECT_STREQ(comm->kind(), "nccl");
    EXPECT_EQ(comm->rank(), 0);
    EXPECT_EQ(comm->worldSize(), 1);
    EXPECT_EQ(comm->table(), nullptr);
    // The host-side collectives are the local communicator's.
    double loss = 2.5;
    comm->allReduceSum(&loss, 1);
    EXPECT_EQ(loss, 2.5);
    EXPECT_EQ(comm->allGatherBytes("id"), (std::vector<std::string>{"id"}));
    GTEST_SKIP() << "a CUDA device is present: nccl started";
  }
  if (startsWith(message, "--comm nccl:")) {
    EXPECT_EQ(message, "--comm nccl: this ztc-train was built without NCCL "
                       "(needs the CUDA toolkit and its NCCL)");
    return;
  }
  ASSERT_FALSE(message.empty());
  // Built with NCCL: no driver (cudaErrorInsufficientDriver) or no device.
  EXPECT_TRUE(startsWith(message, "nccl: rank 0 sees no CUDA device "
                                  "(cudaGetDeviceCount"))
      << message;
  EXPECT_EQ(message.back(), ')') << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}
