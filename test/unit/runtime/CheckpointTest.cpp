//===- CheckpointTest.cpp - training state on disk ------------------------===//
//
// Round trip, validation against a manifest (every mismatch named), every
// error, and crash safety: a child process saving checkpoints in a loop is
// killed with SIGKILL at random moments, and the checkpoint left behind must
// load, complete and self-consistent, every time.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Checkpoint.h"

#include "TestUtil.h"
#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/SafeTensors.h"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace ztc::rt;
using ztc::rt::test::TempDir;
using ztc::rt::test::writeText;

namespace {

Manifest trainManifest() {
  Manifest manifest;
  manifest.kind = ArtifactKind::Train;
  manifest.bindings = {
      {BindingRole::Input, "x", "x", DType::Float32, {4, 3}},
      {BindingRole::Param, "w", "", DType::Float32, {3}},
      {BindingRole::State, "w.momentum", "", DType::Float32, {3}},
      {BindingRole::Constant, "c", "", DType::Int64, {2}},
      {BindingRole::Hyper, "lr", "", DType::Float32, {}},
  };
  return manifest;
}

Tensor filled(std::vector<int64_t> shape, float value) {
  Tensor tensor(DType::Float32, std::move(shape));
  for (int64_t i = 0; i < tensor.numElements(); ++i)
    tensor.data<float>()[i] = value;
  return tensor;
}

Checkpoint sample() {
  Checkpoint checkpoint;
  checkpoint.step = 12;
  checkpoint.epoch = 3;
  checkpoint.batch = 1;
  checkpoint.seed = 99;
  checkpoint.tensors["w"] = filled({3}, 1.5f);
  checkpoint.tensors["w.momentum"] = filled({3}, -2.0f);
  checkpoint.metadata["batch_size"] = "4";
  return checkpoint;
}

/// A pid that belonged to a process that has exited.
pid_t deadPid() {
  pid_t pid = ::fork();
  if (pid == 0)
    ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

} // namespace

TEST(CheckpointTest, RoundTrip) {
  TempDir dir;
  saveCheckpoint(dir / "ckpt", sample());
  EXPECT_TRUE(std::filesystem::exists(dir / "ckpt/checkpoint.safetensors"));
  Checkpoint loaded = loadCheckpoint(dir / "ckpt", trainManifest());
  EXPECT_EQ(loaded.step, 12u);
  EXPECT_EQ(loaded.epoch, 3u);
  EXPECT_EQ(loaded.batch, 1u);
  EXPECT_EQ(loaded.seed, 99u);
  EXPECT_EQ(loaded.metadata,
            (std::map<std::string, std::string>{{"batch_size", "4"}}));
  ASSERT_EQ(loaded.tensors.size(), 2u);
  EXPECT_EQ(loaded.tensors["w"].bytes, filled({3}, 1.5f).bytes);
  EXPECT_EQ(loaded.tensors["w.momentum"].bytes, filled({3}, -2.0f).bytes);

  // The file is plain safetensors with the documented metadata.
  SafeTensors raw = readSafeTensors(dir / "ckpt/checkpoint.safetensors");
  EXPECT_EQ(raw.metadata["format"], "ztc-checkpoint-2");
  EXPECT_EQ(raw.metadata["sha256"].size(), 64u);
  EXPECT_EQ(raw.metadata["step"], "12");
  EXPECT_EQ(raw.metadata["epoch"], "3");
  EXPECT_EQ(raw.metadata["batch"], "1");
  EXPECT_EQ(raw.metadata["seed"], "99");

  // A later save replaces it.
  Checkpoint later = sample();
  later.step = 13;
  saveCheckpoint(dir / "ckpt", later);
  EXPECT_EQ(loadCheckpoint(dir / "ckpt").step, 13u);
}

TEST(CheckpointTest, EveryDamagedByteIsCaught) {
  // Flip each byte of the file in turn: the load fails (a header that no
  // longer parses, or contents that no longer match their SHA-256), never
  // resumes from something else.
  TempDir dir;
  saveCheckpoint(dir.path(), sample());
  std::string path = dir / "checkpoint.safetensors";
  std::string good = readFile(path);
  size_t caught = 0;
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bad = good;
    bad[at] = char(bad[at] ^ 0x10);
    writeText(path, bad);
    caught += !ZTC_ERROR_MESSAGE(loadCheckpoint(dir.path())).empty();
  }
  EXPECT_EQ(caught, good.size());
  writeText(path, good);
  EXPECT_EQ(loadCheckpoint(dir.path()).step, 12u);
  // A data byte names the hash.
  std::string bad = good;
  bad[bad.size() - 1] = char(bad.back() ^ 1);
  writeText(path, bad);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(loadCheckpoint(dir.path())),
            path + ": its contents do not match the SHA-256 it records: the "
                   "file was changed or damaged after it was written");
}

TEST(CheckpointTest, FormatOneWithoutHashStillLoads) {
  TempDir dir;
  SafeTensors old;
  old.tensors["w"] = filled({3}, 1.0f);
  old.metadata = {{"format", "ztc-checkpoint-1"},
                  {"step", "5"},
                  {"epoch", "0"},
                  {"batch", "2"},
                  {"seed", "1"}};
  writeSafeTensors(dir / "checkpoint.safetensors", old);
  EXPECT_EQ(loadCheckpoint(dir.path()).step, 5u);
}

TEST(CheckpointTest, MismatchesAreNamed) {
  TempDir dir;
  Checkpoint bad = sample();
  bad.tensors.erase("w");
  bad.tensors["w.momentum"] = filled({4}, 0.0f);
  bad.tensors["v"] = filled({2}, 0.0f);
  saveCheckpoint(dir.path(), bad);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(loadCheckpoint(dir.path(), trainManifest())),
            dir / "checkpoint.safetensors" +
                " does not match the artifact: missing param 'w' "
                "(float32[3]); state 'w.momentum': expected float32[3], got "
                "float32[4]; unexpected tensor 'v' (float32[2])");
}

TEST(CheckpointTest, Errors) {
  TempDir dir;
  std::string path = dir / "checkpoint.safetensors";
  EXPECT_EQ(ZTC_ERROR_MESSAGE(loadCheckpoint(dir / "nowhere")),
            "no checkpoint in " + (dir / "nowhere") + " (directory " +
                (dir / "nowhere") + " does not exist)");
  EXPECT_EQ(ZTC_ERROR_MESSAGE(loadCheckpoint(dir.path())),
            "no checkpoint in " + dir.path() + " (" + path +
                " does not exist)");

  SafeTensors plain;
  plain.tensors["w"] = filled({3}, 0.0f);
  writeSafeTensors(path, plain);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(loadCheckpoint(dir.path())),
            path + ": not a ztc checkpoint (metadata 'format' is missing; "
                   "expected 'ztc-checkpoint-2')");
  plain.metadata = {{"format", "ztc-checkpoint-7"}};
  writeSafeTensors(path, plain);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(loadCheckpoint(dir.path())),
            path + ": checkpoint format 'ztc-checkpoint-7'; this runtime "
                   "reads 'ztc-checkpoint-2' and 'ztc-checkpoint-1'");
  plain.metadata = {{"format", "ztc-checkpoint-1"},
                    {"step", "-3"},
                    {"epoch", "0"},
                    {"batch", "0"},
                    {"seed", "0"}};
  writeSafeTensors(path, plain);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(loadCheckpoint(dir.path())),
            path + ": metadata 'step' is not a non-negative integer: '-3'");
  plain.metadata.erase("seed");
  plain.metadata["step"] = "3";
  writeSafeTensors(path, plain);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(loadCheckpoint(dir.path())),
            path + ": metadata 'seed' is missing");

  // A truncated file is reported by the safetensors reader.
  saveCheckpoint(dir.path(), sample());
  std::string bytes = readFile(path);
  writeText(path, bytes.substr(0, bytes.size() - 5));
  std::string message = ZTC_ERROR_MESSAGE(loadCheckpoint(dir.path()));
  EXPECT_EQ(message.rfind(path + ": tensor '", 0), 0u) << message;
  EXPECT_NE(message.find("truncated file?"), std::string::npos) << message;

  Checkpoint reserved = sample();
  reserved.metadata["step"] = "4";
  EXPECT_EQ(ZTC_ERROR_MESSAGE(saveCheckpoint(dir.path(), reserved)),
            "checkpoint metadata 'step' is reserved");
}

TEST(CheckpointTest, SaveRemovesTemporariesOfDeadWriters) {
  TempDir dir;
  std::string dead =
      dir / ("checkpoint.safetensors.tmp-" + std::to_string(deadPid()));
  std::string alive =
      dir / ("checkpoint.safetensors.tmp-" + std::to_string(::getppid()));
  // A file of the user's with the same suffix is not ztc's to remove.
  std::string users = dir / ("notes.txt.tmp-" + std::to_string(deadPid()));
  writeText(dead, "partial");
  writeText(alive, "someone else's");
  writeText(users, "mine");
  saveCheckpoint(dir.path(), sample());
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive));
  EXPECT_TRUE(std::filesystem::exists(users));
  EXPECT_EQ(loadCheckpoint(dir.path()).step, 12u);
}

TEST(CheckpointTest, SigkillDuringSaveLeavesTheLastCheckpoint) {
  // Big enough (8 MiB) that a kill often lands inside a write.
  constexpr int64_t kElements = 2 << 20;
  TempDir dir;
  std::string ckpt = dir / "ckpt";
  std::mt19937 rng(1234);
  uint64_t lastSeen = 0;
  int interruptedWrites = 0;
  for (int round = 0; round < 6; ++round) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // Save forever; the step counts on from the last checkpoint, and
      // every tensor element equals the step.
      try {
        uint64_t step = 0;
        if (std::filesystem::exists(ckpt + "/checkpoint.safetensors"))
          step = loadCheckpoint(ckpt).step;
        for (;;) {
          ++step;
          Checkpoint checkpoint;
          checkpoint.step = step;
          checkpoint.tensors["w"] =
              filled({kElements}, static_cast<float>(step));
          checkpoint.tensors["w.momentum"] =
              filled({3}, -static_cast<float>(step));
          saveCheckpoint(ckpt, checkpoint);
        }
      } catch (...) {
      }
      ::_exit(1);
    }
    // Let it save at least once past the last seen step, then kill it at a
    // random moment.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::error_code error;
      if (std::filesystem::exists(ckpt + "/checkpoint.safetensors", error)) {
        try {
          if (loadCheckpoint(ckpt).step > lastSeen)
            break;
        } catch (const Error &) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 40000));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the saving child stopped on its own";

    for (const auto &entry : std::filesystem::directory_iterator(ckpt))
      interruptedWrites +=
          entry.path().filename().string().find(".tmp-") != std::string::npos;
    Checkpoint loaded = loadCheckpoint(ckpt);
    EXPECT_GT(loaded.step, lastSeen) << round;
    lastSeen = loaded.step;
    const Tensor &w = loaded.tensors.at("w");
    ASSERT_EQ(w.numElements(), kElements);
    for (int64_t i = 0; i < kElements; i += 4093)
      ASSERT_EQ(w.data<float>()[i], static_cast<float>(loaded.step)) << i;
    ASSERT_EQ(w.data<float>()[kElements - 1], static_cast<float>(loaded.step));
    EXPECT_EQ(loaded.tensors.at("w.momentum").data<float>()[2],
              -static_cast<float>(loaded.step));
  }
  // Not asserted (timing): how often the kill interrupted a write.
  std::cout << "kills that interrupted a write: " << interruptedWrites
            << " of 6\n";
}
