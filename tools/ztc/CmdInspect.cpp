//===- CmdInspect.cpp - `ztc inspect` -------------------------------------===//
//
// `ztc inspect ART.ztc | MODEL.onnx`: what a training step needs before it
// runs: the memory report a compiled artifact stores, or the plan of a model
// under compile flags (each recompute policy or precision side by side with
// `all`), with the collectives, the weights and whether it fits
// --device-memory.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "passes/Kernel/Footprint.h"
#include "tools/ztc/Compile.h"
#include "tools/ztc/MemoryReport.h"
#include "tools/ztc/RuntimeBridge.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::SubCommand &inspectCommand() {
  static cl::SubCommand command(
      "inspect", "Show what a training step needs before it runs: its "
                 "memory per rank, by role and over time");
  return command;
}

namespace {

cl::opt<std::string> inspectPath(cl::Positional,
                                 cl::desc("ART.ztc | MODEL.onnx"), cl::Required,
                                 cl::sub(inspectCommand()));
cl::opt<bool> inspectMemory(
    "memory",
    cl::desc("The memory report (the default): parameters, optimizer "
             "state, data and the arena, the arena at its fullest by role "
             "(saved activations, recomputation, gradients, workspace) and "
             "the tensors live then with their ONNX nodes"),
    cl::init(true), cl::sub(inspectCommand()));
cl::opt<bool> inspectJson("json", cl::desc("Print the report as JSON"),
                          cl::sub(inspectCommand()));
cl::opt<bool> inspectComm(
    "comm",
    cl::desc("Also list each entry's collectives (op, element type, calls, "
             "elements) and the elements each rank sends and receives per "
             "call of the entry (the JSON always has them)"),
    cl::sub(inspectCommand()));
cl::opt<bool> inspectWeights(
    "weights",
    cl::desc("Also list the weights the step binds: each parameter, trained "
             "or frozen, and each buffer, with its element type and shape "
             "(the JSON always has them)"),
    cl::sub(inspectCommand()));
cl::opt<std::string> inspectSvg(
    "svg",
    cl::desc("Also draw the arena's live bytes over the step's ops, by "
             "role, as an SVG"),
    cl::value_desc("FILE"), cl::sub(inspectCommand()));

PipelineFlags
    inspectFlags(inspectCommand(), kCompilePipelineFlags,
                 {{"recompute", "or all, to compare every policy"},
                  {"precision", "or all, to compare fp32, bf16 and fp16"}});

/// Prints `reports` as `ztc inspect` was asked to: JSON, one report, or a
/// table of several; writes the SVG of the first.
int printInspection(llvm::ArrayRef<mz::MemoryReport> reports) {
  if (!inspectSvg.empty()) {
    std::string svg;
    llvm::raw_string_ostream os(svg);
    mz::writeMemorySvg(reports.front(), os);
    if (std::string error = writeOutput(inspectSvg, svg); !error.empty()) {
      llvm::errs() << "ztc: error: " << error << "\n";
      return 1;
    }
  }
  if (inspectJson) {
    llvm::json::Array array;
    for (const mz::MemoryReport &report : reports)
      array.push_back(mz::memoryReportToJson(report));
    llvm::outs() << llvm::formatv("{0:2}",
                                  reports.size() == 1
                                      ? std::move(array.front())
                                      : llvm::json::Value(std::move(array)))
                 << "\n";
  } else if (reports.size() == 1) {
    mz::printMemoryReport(reports.front(), llvm::outs());
  } else {
    mz::printMemoryComparison(reports, llvm::outs());
  }
  if (inspectWeights && !inspectJson)
    mz::printWeights(reports.front(), llvm::outs());
  if (inspectComm && !inspectJson)
    for (const mz::MemoryReport &report : reports) {
      if (reports.size() > 1)
        llvm::outs() << "recompute " << report.policy << ", "
                     << report.precision << ": ";
      mz::printCommunication(report, llvm::outs());
    }
  return 0;
}

/// `ztc inspect ART.ztc`: the report `ztc compile` stored.
int inspectArtifact() {
  auto fail = [](const Twine &message) {
    llvm::errs() << "ztc: error: " << message << "\n";
    return 1;
  };
  if (inspectFlags.any() || batchSize != 0 || !inputShapes.empty() ||
      !constantInputs.empty() || !configFile.empty())
    return fail("compile flags apply to a model (ztc inspect MODEL.onnx "
                "...); " +
                inspectPath + " is a compiled artifact");
  std::string path = inspectPath + "/memory.json";
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return fail(path + ": " + file.getError().message() +
                " (an artifact of a forward step, or of an older ztc: "
                "compile it again)");
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*file)->getBuffer());
  if (!json)
    return fail(path + ": " + llvm::toString(json.takeError()));
  std::string error;
  std::optional<mz::MemoryReport> report =
      mz::memoryReportFromJson(*json, error);
  if (!report)
    return fail(path + ": " + error);
  std::vector<::ztc::bridge::BucketPlan> buckets;
  if (!(error = ::ztc::bridge::readBucketPlans(inspectPath, buckets)).empty())
    return fail(error);
  // (--json prints the report alone: the longest step's.)
  if (int status = printInspection({*report});
      status != 0 || buckets.empty() || inspectJson)
    return status;
  // --seq-buckets: the report is the longest step's; each shorter one runs
  // in the same arena with constants of its own.
  uint64_t arena = 0, extra = 0;
  for (const auto &bucket : buckets) {
    arena = std::max(arena, bucket.arenaBytes);
    if (&bucket != &buckets.back())
      extra += bucket.constantBytes;
  }
  llvm::outs() << "sequence buckets: " << buckets.size()
               << " steps share the parameters, optimizer state and one "
                  "arena of "
               << formatBytes(arena) << "\n";
  for (const auto &bucket : buckets)
    llvm::outs() << llvm::formatv(
        "  length {0,-6} arena {1,12}  constants "
        "{2,12}{3}\n",
        bucket.length, formatBytes(bucket.arenaBytes),
        formatBytes(bucket.constantBytes),
        &bucket == &buckets.back() ? "  (the report above)" : "");
  llvm::outs() << "memory per rank with every bucket: "
               << formatBytes(report->total() - report->arena + arena + extra)
               << " (the shorter steps' constants add " << formatBytes(extra)
               << ")\n";
  return 0;
}

/// `ztc inspect MODEL.onnx [flags]`: plans the step (nothing is built) once,
/// or once per policy with `--recompute all`.
int inspectModel() {
  std::optional<ConfigFlags> config = readConfigFlags(inspectFlags);
  if (!config)
    return 1;
  std::optional<std::optional<uint64_t>> device = deviceMemoryBytes();
  if (!device)
    return 1;
  std::unique_ptr<MLIRContext> context = makeContext();
  std::optional<mz::onnx::ImportOptions> options =
      trainingImportOptions(config->batchSize);
  if (!options)
    return 1;
  std::vector<std::string> recompute = inspectFlags.values("recompute");
  std::vector<std::string> precision = inspectFlags.values("precision");
  bool all = !recompute.empty() && recompute.back() == "all";
  bool allPrecisions = !precision.empty() && precision.back() == "all";
  if (all && allPrecisions) {
    llvm::errs() << "ztc: error: --recompute all and --precision all: "
                    "compare one at a time\n";
    return 1;
  }
  // One row per policy or per precision, or the one plan asked for.
  std::vector<std::pair<std::string, std::string>> rows;
  if (all)
    for (const char *policy : {"none", "selective", "full", "sqrt"})
      rows.push_back({"recompute", policy});
  else if (allPrecisions)
    for (const char *name : {"fp32", "bf16", "fp16"})
      rows.push_back({"precision", name});
  else
    rows.push_back({"", ""});
  std::vector<mz::MemoryReport> reports;
  std::vector<std::string> skipped;
  for (const auto &[option, value] : rows) {
    mz::TrainingPipelineOptions training;
    // The target's defaults and what its kernels take (CUDA: their scratch
    // and cuBLAS's workspace) are part of the plan.
    training.target = target;
    std::map<std::string, std::string> overrides = config->overrides;
    if (!option.empty())
      overrides[option] = value;
    if (failed(inspectFlags.apply(training, overrides)))
      return 1;
    std::string error = resolveLoraConfig(training);
    if (!error.empty()) {
      llvm::errs() << "ztc: error: " << error << "\n";
      return 1;
    }
    if (failed(training.verify(error))) {
      // A precision not built yet gets a line after the table.
      if (allPrecisions) {
        skipped.push_back(value + ": not planned: " + error);
        continue;
      }
      // ztc inspect also takes `all`.
      if (StringRef(error).starts_with("--recompute '"))
        error += " (or all, to compare them)";
      llvm::errs() << "ztc: error: " << error << "\n";
      return 1;
    }
    std::string policy = option == "recompute" ? value : "";
    // With --recompute all, a model with no blocks has no `full` row: its
    // reason follows the table instead of failing the comparison.
    std::vector<std::string> errors;
    std::optional<ScopedDiagnosticHandler> collect;
    if (all && policy == "full")
      collect.emplace(context.get(), [&](Diagnostic &diag) {
        errors.push_back(oneLine(diag.str()));
        return success();
      });
    OwningOpRef<ModuleOp> module =
        mz::planTraining(*context, inspectPath, *options, training);
    collect.reset();
    if (!module && !errors.empty()) {
      skipped.push_back(policy + ": not planned: " + errors.front());
      continue;
    }
    if (!module)
      return 1;
    FailureOr<mz::MemoryReport> report = mz::buildMemoryReport(*module);
    if (failed(report))
      return 1;
    reports.push_back(std::move(*report));
  }
  int status = printInspection(reports);
  for (const std::string &line : skipped)
    llvm::outs() << line << "\n";
  // One line per plan: whether it fits in --device-memory; under --json
  // the report stays one JSON document, and the verdict goes to stderr.
  llvm::raw_ostream &verdicts = inspectJson ? llvm::errs() : llvm::outs();
  if (std::optional<uint64_t> bytes = *device)
    for (const mz::MemoryReport &report : reports) {
      std::string row = all             ? "recompute " + report.policy
                        : allPrecisions ? "precision " + report.precision
                                        : std::string("device memory");
      std::string verdict =
          report.total() <= *bytes
              ? llvm::formatv("{0} bytes per rank fit in --device-memory {1} "
                              "bytes ({2} to spare)",
                              report.total(), *bytes,
                              mz::bytesText(*bytes - report.total()))
                    .str()
              : deviceMemoryShortfall(report.total(),
                                      report.total() - report.arena, *bytes);
      verdicts << row << ": " << verdict << "\n";
    }
  return status;
}

} // namespace

int runInspect() {
  if (llvm::sys::fs::is_directory(inspectPath) &&
      llvm::sys::fs::exists(inspectPath + "/manifest.json"))
    return inspectArtifact();
  return inspectModel();
}

} // namespace ztc::driver
