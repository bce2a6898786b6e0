//===- ztc-train.cpp - train a compiled artifact, runtime only ------------===//
//
// The training executable: what `mpirun -np N ztc-train ART.ztc --data DIR`
// starts on every rank, and what `ztc train` forwards to. It links the ztc
// runtime and nothing of MLIR or LLVM (a test checks), so a GPU node needs
// only this binary, a host compiler or nvcc, and the artifact: an artifact
// shipped as source (`ztc compile --no-build`) is built on first load.
//
// Flags are parsed here by hand, strictly: an unknown flag, a missing value
// or a malformed number is a one-line error naming the flag, exit status 1;
// errors of the run itself (rt::Error) are one line too. Messages start with
// the program name argv[0] gives ("ztc" when `ztc train` forwards).
//
//===----------------------------------------------------------------------===//

#include "runtime/Error.h"
#include "runtime/train/Trainer.h"
#include "tools/ztc-train/DeviceMemoryProbe.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

const char kUsage[] =
    "USAGE: %s ART.ztc --data DIR [options]\n"
    "\n"
    "Trains a compiled artifact (ztc compile) on DIR/<input>.npy, the\n"
    "sample count first; the labels input is `labels`.\n"
    "\n"
    "OPTIONS:\n"
    "  --data DIR        directory with one .npy per input (required), or\n"
    "                    a token dataset: DIR with tokens.npy and\n"
    "                    offsets.npy (tools/ztc_dataset.py), or a Megatron\n"
    "                    PREFIX of PREFIX.bin and PREFIX.idx\n"
    "  --batching MODE   token datasets: pack (default: documents end to\n"
    "                    end, cut into rows of the compiled length), pad\n"
    "                    (one document per row, padded; labels -100 there)\n"
    "                    or group (pad, similar lengths batched together, as\n"
    "                    the Hugging Face Trainer's group_by_length); pad and\n"
    "                    group run each batch at the shortest of the\n"
    "                    artifact's --seq-buckets that holds it\n"
    "  --sampler S       random (default: shuffled by --seed every epoch)\n"
    "                    or sequential (the data's own order, as the\n"
    "                    Hugging Face Trainer's train_sampling_strategy)\n"
    "  --eos-token ID    pack: a token put after every document\n"
    "  --pad-token ID    pad, group: the input id of padding (default 0)\n"
    "  --steps N         optimizer steps to run, counted from the start of\n"
    "                    training (0: --epochs decides)\n"
    "  --epochs E        epochs to run when --steps is 0 (default 1)\n"
    "  --seed S          seed of the data order and the dropout masks\n"
    "                    (default 0)\n"
    "  --log-every K     log the mean loss every K steps (default 10; 0: only\n"
    "                    the last); the loss is read from the device only "
    "then\n"
    "  --metrics FILE    also write one JSON line per logged step to FILE\n"
    "                    (step, epoch, loss, learning_rate, throughput, arena\n"
    "                    bytes: the Hugging Face Trainer's log_history\n"
    "                    fields); a resumed run appends\n"
    "  --no-prefetch     gather each batch when the step needs it, not on\n"
    "                    a background thread while the previous step runs\n"
    "  --save DIR        write checkpoints to DIR\n"
    "  --save-every K    also checkpoint every K steps (needs --save)\n"
    "  --save-consolidated TYPE\n"
    "                    sharded checkpoints: also write the whole weights\n"
    "                    as DIR/step-N/model.safetensors in fp16, bf16 or\n"
    "                    fp32, streamed tensor by tensor\n"
    "  --save-total-limit K\n"
    "                    sharded checkpoints (ZeRO 1-3 on several ranks):\n"
    "                    keep the K newest (default 1)\n"
    "  --resume DIR      continue from the checkpoint in DIR\n"
    "  --dump-grads DIR  write the first step's loss and gradients (before\n"
    "                    the update) to DIR\n"
    "  --eval-data DIR   held-out samples (the same .npy files as --data):\n"
    "                    after the last step, and every --eval-every steps,\n"
    "                    log their loss with BatchNorm's running statistics\n"
    "                    and no dropout (PyTorch's model.eval()), and for a\n"
    "                    cross entropy their accuracy; under every ZeRO stage\n"
    "  --eval-every K    also evaluate every K steps (needs --eval-data)\n"
    "  --check-data      scan every sample before training: labels within\n"
    "                    the loss's classes, no NaN or infinity in inputs\n"
    "  --comm KIND       auto (default: when mpirun or srun started several\n"
    "                    ranks, nccl for a CUDA artifact and mpi for a CPU\n"
    "                    one; else local), local, mpi or nccl\n"
    "  --config FILE     a DeepSpeed config (ds_config.json): the artifact\n"
    "                    must be compiled with it (ztc compile --config);\n"
    "                    its steps_per_print sets --log-every and its\n"
    "                    stage3_gather_16bit_weights_on_model_save sets\n"
    "                    --save-consolidated\n"
    "  --strict          with --config: every key ztc does not implement is\n"
    "                    an error, not a warning\n"
    "  --collective-timeout S\n"
    "                    seconds a collective waits for the other ranks\n"
    "                    before this rank exits with an error (default 60;\n"
    "                    0: forever)\n"
    "  --device-memory-report FILE\n"
    "                    write the device memory the run used to FILE as\n"
    "                    JSON: context_used_bytes (right after the CUDA\n"
    "                    context is made, before the trainer allocates),\n"
    "                    peak_used_bytes (the most in use, sampled every\n"
    "                    0.1 ms until training ends) and measured_bytes\n"
    "                    (their difference), the whole device's: one rank,\n"
    "                    nothing else on the device. A CPU artifact has no\n"
    "                    device memory: FILE holds nulls and a note\n"
    "  --comm-thread     CPU: run the step's collectives on a thread of their\n"
    "                    own while the step computes (an artifact compiled\n"
    "                    with --overlap-comm, the default); without it they\n"
    "                    run in program order, which is faster when the\n"
    "                    ranks leave no core free\n"
    "  --no-cuda-graph   CUDA: call each step's entry directly instead of\n"
    "                    replaying the CUDA graph captured at its second\n"
    "                    call (steps with collectives are never captured)\n"
    "\n"
    "MULTI-RANK: compile with --world-size N (and --zero 0|1|2|3), then\n"
    "  mpirun -np N %s ART.ztc --data DIR\n"
    "Each rank takes its share of every global batch (batch size x N);\n"
    "rank 0 logs the mean loss over ranks; from ZeRO stage 1 on, every rank\n"
    "writes its part of each checkpoint.\n"
    "  --help            print this help\n";

/// The program name for messages: argv[0]'s last path component.
std::string programName(const char *argv0) {
  const char *slash = std::strrchr(argv0, '/');
  return slash ? slash + 1 : argv0;
}

/// A parse failure, already worded for the user.
struct UsageError {
  std::string message;
};

uint64_t parseCount(const std::string &flag, const std::string &text) {
  errno = 0;
  char *end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || text[0] == '+' || *end != '\0' ||
      errno == ERANGE)
    throw UsageError{flag + " expects a non-negative integer, got '" + text +
                     "'"};
  return value;
}

/// What main() does besides training, as the flags ask.
struct ToolOptions {
  bool help = false;
  std::string configPath;
  bool strict = false;
  bool logEveryGiven = false;
  /// --device-memory-report FILE; empty: not measured.
  std::string deviceMemoryFile;
};

ztc::rt::TrainOptions parseArguments(int argc, char **argv, ToolOptions &tool) {
  ztc::rt::TrainOptions options;
  bool haveData = false, batchingGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      tool.help = true;
      return options;
    }
    if (arg == "--check-data") {
      options.checkData = true;
      continue;
    }
    if (arg == "--strict") {
      tool.strict = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!options.artifactDir.empty())
        throw UsageError{"one artifact only; got '" + options.artifactDir +
                         "' and '" + arg + "'"};
      options.artifactDir = arg;
      continue;
    }
    // --flag=value or --flag value.
    std::string flag = arg, value;
    size_t equals = arg.find('=');
    bool inlineValue = equals != std::string::npos;
    if (inlineValue) {
      flag = arg.substr(0, equals);
      value = arg.substr(equals + 1);
    }
    auto takeValue = [&]() -> std::string {
      if (inlineValue)
        return value;
      if (i + 1 >= argc)
        throw UsageError{flag + " needs a value"};
      return argv[++i];
    };
    if (flag == "--data") {
      options.dataDir = takeValue();
      haveData = true;
    } else if (flag == "--steps") {
      options.steps = parseCount(flag, takeValue());
    } else if (flag == "--epochs") {
      options.epochs = parseCount(flag, takeValue());
    } else if (flag == "--seed") {
      options.seed = parseCount(flag, takeValue());
    } else if (flag == "--log-every") {
      options.logEvery = parseCount(flag, takeValue());
      tool.logEveryGiven = true;
    } else if (flag == "--config") {
      tool.configPath = takeValue();
    } else if (flag == "--no-prefetch") {
      options.prefetch = false;
    } else if (flag == "--metrics") {
      options.metricsFile = takeValue();
    } else if (flag == "--save") {
      options.saveDir = takeValue();
    } else if (flag == "--save-every") {
      options.saveEvery = parseCount(flag, takeValue());
    } else if (flag == "--save-consolidated") {
      options.saveConsolidated = takeValue();
      if (options.saveConsolidated != "fp16" &&
          options.saveConsolidated != "bf16" &&
          options.saveConsolidated != "fp32")
        throw UsageError{"--save-consolidated expects fp16, bf16 or fp32, "
                         "got '" +
                         options.saveConsolidated + "'"};
    } else if (flag == "--save-total-limit") {
      options.saveTotalLimit = parseCount(flag, takeValue());
      if (options.saveTotalLimit == 0)
        throw UsageError{"--save-total-limit must be at least 1"};
    } else if (flag == "--resume") {
      options.resumeDir = takeValue();
    } else if (flag == "--eval-data") {
      options.evalDataDir = takeValue();
      if (options.evalDataDir.empty())
        throw UsageError{"--eval-data needs a directory"};
    } else if (flag == "--eval-every") {
      options.evalEvery = parseCount(flag, takeValue());
    } else if (flag == "--dump-grads") {
      options.dumpGradsDir = takeValue();
    } else if (flag == "--comm") {
      options.comm = takeValue();
      if (options.comm != "auto" && options.comm != "local" &&
          options.comm != "mpi" && options.comm != "nccl")
        throw UsageError{"--comm expects auto, local, mpi or nccl, got '" +
                         options.comm + "'"};
    } else if (flag == "--collective-timeout") {
      options.collectiveTimeout = double(parseCount(flag, takeValue()));
    } else if (flag == "--device-memory-report") {
      tool.deviceMemoryFile = takeValue();
      if (tool.deviceMemoryFile.empty())
        throw UsageError{"--device-memory-report needs a file"};
    } else if (flag == "--comm-thread") {
      options.commThread = true;
    } else if (flag == "--no-cuda-graph") {
      options.cudaGraphs = false;
    } else if (flag == "--batching") {
      options.tokens.mode = takeValue();
      batchingGiven = true;
      if (options.tokens.mode != "pack" && options.tokens.mode != "pad" &&
          options.tokens.mode != "group")
        throw UsageError{"--batching expects pack, pad or group, got '" +
                         options.tokens.mode + "'"};
    } else if (flag == "--sampler") {
      std::string sampler = takeValue();
      if (sampler != "random" && sampler != "sequential")
        throw UsageError{"--sampler expects random or sequential, got '" +
                         sampler + "'"};
      options.sequential = sampler == "sequential";
    } else if (flag == "--eos-token") {
      options.tokens.eos = int64_t(parseCount(flag, takeValue()));
    } else if (flag == "--pad-token") {
      options.tokens.pad = int64_t(parseCount(flag, takeValue()));
    } else {
      throw UsageError{"unknown flag '" + flag + "' (see --help)"};
    }
  }
  if (options.artifactDir.empty())
    throw UsageError{"no artifact given (ART.ztc; see --help)"};
  if (!haveData || options.dataDir.empty())
    throw UsageError{"--data DIR is required"};
  if (options.saveEvery != 0 && options.saveDir.empty())
    throw UsageError{"--save-every needs --save DIR"};
  if (!options.saveConsolidated.empty() && options.saveDir.empty())
    throw UsageError{"--save-consolidated needs --save DIR"};
  if (options.evalEvery != 0 && options.evalDataDir.empty())
    throw UsageError{"--eval-every needs --eval-data DIR"};
  if (tool.strict && tool.configPath.empty())
    throw UsageError{"--strict applies to --config FILE"};
  if (options.tokens.eos >= 0 && options.tokens.mode != "pack")
    throw UsageError{"--eos-token applies to --batching pack"};
  bool tokenFlags =
      batchingGiven || options.tokens.eos >= 0 || options.tokens.pad != 0;
  if (tokenFlags && !ztc::rt::isTokenDataset(options.dataDir) &&
      (options.evalDataDir.empty() ||
       !ztc::rt::isTokenDataset(options.evalDataDir)))
    throw UsageError{"--batching, --eos-token and --pad-token apply to a "
                     "token dataset (a directory with tokens.npy and "
                     "offsets.npy, or a Megatron PREFIX.bin/PREFIX.idx); " +
                     options.dataDir + " is not one"};
  return options;
}

/// --config: reads the DeepSpeed config, stops on a key ztc refuses, and
/// takes steps_per_print as --log-every; the trainer checks the artifact
/// against it, and rank 0 warns of the keys ignored.
void applyConfig(const std::string &path, bool strict, bool logEveryGiven,
                 ztc::rt::TrainOptions &options) {
  ztc::rt::DeepSpeedConfig config = ztc::rt::readDeepSpeedConfig(path);
  std::vector<std::string> warnings;
  std::string error = ztc::rt::checkNotices(config, strict, warnings);
  if (!error.empty())
    throw ztc::rt::Error(error);
  if (config.stepsPerPrint) {
    if (logEveryGiven && options.logEvery != *config.stepsPerPrint)
      throw ztc::rt::Error(path + ": steps_per_print is " +
                           std::to_string(*config.stepsPerPrint) +
                           ", but --log-every is " +
                           std::to_string(options.logEvery) + ": give one");
    options.logEvery = *config.stepsPerPrint;
  }
  options.config = std::move(config);
}

} // namespace

int main(int argc, char **argv) {
  std::string program = programName(argc > 0 ? argv[0] : "ztc-train");
  ToolOptions tool;
  ztc::rt::TrainOptions options;
  try {
    options = parseArguments(argc, argv, tool);
  } catch (const UsageError &error) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(),
                 error.message.c_str());
    return 1;
  }
  if (tool.help) {
    // `ztc train` forwards here as "ztc": its usage line says "ztc train".
    std::string usage = program == "ztc" ? "ztc train" : program;
    std::printf(kUsage, usage.c_str(), usage.c_str());
    return 0;
  }
  try {
    if (!tool.configPath.empty())
      applyConfig(tool.configPath, tool.strict, tool.logEveryGiven, options);
    std::unique_ptr<ztc::rt::DeviceMemoryProbe> probe;
    if (!tool.deviceMemoryFile.empty())
      probe = ztc::rt::DeviceMemoryProbe::forArtifact(options.artifactDir);
    ztc::rt::train(options);
    if (probe) {
      probe->finish();
      probe->write(tool.deviceMemoryFile);
      if (!probe->measured())
        std::fprintf(
            stderr,
            "%s: note: --device-memory-report: a %s artifact has no device "
            "memory of its own; %s records nulls\n",
            program.c_str(), probe->targetName(),
            tool.deviceMemoryFile.c_str());
    }
  } catch (const std::exception &error) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), error.what());
    return 1;
  }
  return 0;
}
