//===- GradCheck.cpp - compiled gradients against finite differences -----===//
//
// `ztc gradcheck` compiles the model's loss and gradients the way `ztc
// compile` does (ztc-attach-loss, ztc-autodiff, the kernel pipeline), but
// after ztc-promote-f64, so everything runs in double precision. The
// artifact has two entries: `ztc_loss_and_grads` (run once) and `ztc_loss`
// (the same function with only the loss kept, run twice per checked
// element). The rules:
//
//   - Inputs are random from the seed. Float inputs (and mse labels) are
//     normal(0, 1). An integer input takes values uniform in [0, B), B the
//     smallest extent it indexes in the IR: the rows of the table a
//     `nn.gather` (or `nn.scatter_add`) reads with it, or the classes of the
//     `nn.nll_loss` it is the target of (cross-entropy labels), followed
//     through reshapes, transposes, broadcasts, slices, concats, gathers of
//     it and integer casts. An integer input that indexes nothing (a mask),
//     and a boolean one, is 0 or 1.
//   - The random key (the `rng` hyper of training-mode Dropout) is the one
//     `ztc run --seed` writes for the seed, the same in every call, so the
//     masks are constants of the check and the loss is a function of the
//     parameters alone.
//   - Parameters are the model's initializers, converted to f64 exactly.
//   - Every element of a parameter with at most 16 is checked; of a larger
//     one, 16 distinct elements drawn from the seed.
//   - The numeric derivative is (L(p + h) - L(p - h)) / ((p + h) - (p - h))
//     with h = 1e-6 max(1, |p|), and an element's error is
//     |analytic - numeric| / max(1, |analytic|, |numeric|): relative for
//     derivatives of magnitude one or more, absolute below, where the
//     rounding of the loss (about 1e-16 |L| / h) would dominate a relative
//     measure.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/GradCheck.h"

#include "passes/Passes.h"
#include "runtime/Runner.h"
#include "tools/ztc/RuntimeBridge.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

using namespace mlir;
using namespace mlir::ztc;
namespace rt = ::ztc::rt;

namespace {

/// Parameters with more elements are checked on a sample of this size.
constexpr int64_t kSampleSize = 16;
/// The finite-difference step, relative to max(1, |p|).
constexpr double kStep = 1e-6;

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

/// The compiled check and what the IR says about its inputs.
struct CheckStep {
  ArtifactContents artifact;
  /// Exclusive upper bound of each integer input's values, by ONNX name.
  llvm::StringMap<int64_t> indexBounds;
  /// The element type of each parameter in the model, by ONNX name.
  llvm::StringMap<Type> paramTypes;
  /// Trainable parameters the loss does not depend on.
  std::vector<std::string> noGrad;
};

/// The smallest extent that `value` (an integer tensor) indexes, followed
/// through ops that move index values without changing them; nullopt when
/// no use indexes.
std::optional<int64_t> indexBound(Value value) {
  std::optional<int64_t> bound;
  auto limit = [&](int64_t extent) {
    bound = bound ? std::min(*bound, extent) : extent;
  };
  SmallVector<Value> work = {value};
  llvm::DenseSet<Value> seen = {value};
  while (!work.empty()) {
    Value current = work.pop_back_val();
    for (OpOperand &use : current.getUses()) {
      Operation *user = use.getOwner();
      unsigned operand = use.getOperandNumber();
      auto dimOf = [](Value tensor, int64_t dim) {
        return cast<RankedTensorType>(tensor.getType()).getDimSize(dim);
      };
      bool follow = false;
      if (auto gather = dyn_cast<nn::GatherOp>(user)) {
        if (operand == 1)
          limit(dimOf(gather.getData(), gather.getAxis()));
        else
          follow = true; // Gathering from index values keeps them.
      } else if (auto scatter = dyn_cast<nn::ScatterAddOp>(user)) {
        if (operand == 1)
          limit(dimOf(scatter.getData(), scatter.getAxis()));
      } else if (auto loss = dyn_cast<nn::NllLossOp>(user)) {
        if (operand == 1)
          limit(dimOf(loss.getLogProbs(), 1));
      } else if (auto castOp = dyn_cast<nn::CastOp>(user)) {
        follow = castOp.getType().getElementType().isSignlessInteger() &&
                 !castOp.getType().getElementType().isInteger(1);
      } else {
        follow = isa<nn::ReshapeOp, nn::TransposeOp, nn::BroadcastToOp,
                     nn::SliceOp, nn::ConcatOp>(user);
      }
      if (follow)
        for (Value result : user->getResults())
          if (seen.insert(result).second)
            work.push_back(result);
    }
  }
  return bound;
}

/// The initializer `bytes` of element type `element`, as doubles.
std::vector<double> widen(StringRef bytes, Type element) {
  std::vector<double> values;
  if (element.isF64()) {
    values.resize(bytes.size() / sizeof(double));
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(double));
  } else if (element.isF32()) {
    std::vector<float> floats(bytes.size() / sizeof(float));
    std::memcpy(floats.data(), bytes.data(), floats.size() * sizeof(float));
    values.assign(floats.begin(), floats.end());
  } else {
    const llvm::fltSemantics &semantics =
        element.isF16() ? APFloat::IEEEhalf() : APFloat::BFloat();
    for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
      uint16_t bits;
      std::memcpy(&bits, bytes.data() + i, 2);
      values.push_back(APFloat(semantics, APInt(16, bits)).convertToDouble());
    }
  }
  return values;
}

/// Reads every parameter binding's value from the model, widened to f64.
LogicalResult readParams(MLIRContext &context, StringRef modelPath,
                         CheckStep &step) {
  ArtifactContents &artifact = step.artifact;
  return onnx::readInitializers(
      context, modelPath,
      [&](StringRef name, StringRef bytes) -> LogicalResult {
        auto type = step.paramTypes.find(name);
        if (type == step.paramTypes.end())
          return success();
        for (const rt::Binding &binding : artifact.manifest.bindings) {
          if (binding.name != name || !rt::isWeight(binding.role))
            continue;
          std::vector<double> values = widen(bytes, type->second);
          rt::Tensor tensor(rt::DType::Float64, binding.shape);
          if (values.size() * sizeof(double) != tensor.byteSize())
            return emitError(FileLineColLoc::get(&context, modelPath, 0, 0))
                   << "initializer '" << name << "' has " << values.size()
                   << " elements, expected " << tensor.numElements();
          std::memcpy(tensor.bytes.data(), values.data(), tensor.byteSize());
          artifact.initialValues[name.str()] = std::move(tensor);
        }
        return success();
      });
}

/// Imports, compiles the f64 entries `loss_and_grads` and `loss` with the
/// training pipeline (precision fp64), and reads the parameters.
LogicalResult compileCheck(MLIRContext &context, StringRef modelPath,
                           const GradCheckOptions &options, CheckStep &step) {
  OwningOpRef<ModuleOp> module =
      onnx::importOnnxFile(context, modelPath, options.import);
  if (!module)
    return failure();
  // The parameters' element types as the model stores them.
  for (func::FuncOp model : module->getOps<func::FuncOp>())
    for (unsigned i = 0, e = model.getNumArguments(); i < e; ++i)
      if (train::hasRole(model, i, train::BindingRole::Param))
        step.paramTypes[train::bindingName(model, i)] =
            cast<ShapedType>(model.getArgument(i).getType()).getElementType();

  TrainingPipelineOptions pipeline;
  pipeline.copyOptionValuesFrom(options.training);
  pipeline.precision = mlir::ztc::Precision::Fp64;
  pipeline.entries = {"loss_and_grads", "loss"};
  std::string error;
  if (failed(pipeline.verify(error)))
    return emitError(UnknownLoc::get(&context)) << error;
  {
    PassManager pm(&context);
    buildTrainingNNPipeline(pm, pipeline);
    if (failed(pm.run(*module)))
      return failure();
  }
  auto grads = module->lookupSymbol<func::FuncOp>("loss_and_grads");
  if (auto noGrad = grads->getAttrOfType<ArrayAttr>(train::kNoGradAttr))
    for (auto name : noGrad.getAsRange<StringAttr>())
      step.noGrad.push_back(name.str());
  for (unsigned i = 0, e = grads.getNumArguments(); i < e; ++i) {
    StringRef name = train::bindingName(grads, i);
    auto type = dyn_cast<RankedTensorType>(grads.getArgument(i).getType());
    if (name.empty() ||
        !(train::hasRole(grads, i, train::BindingRole::Input) ||
          train::hasRole(grads, i, train::BindingRole::Label)) ||
        !type || !type.getElementType().isSignlessInteger())
      continue;
    // An empty table (extent 0) admits no index at all; 0 is the least bad.
    if (std::optional<int64_t> bound = indexBound(grads.getArgument(i)))
      step.indexBounds[name] = std::max<int64_t>(*bound, 1);
  }
  {
    PassManager pm(&context);
    buildNNToKernelPipeline(pm);
    if (failed(pm.run(*module)))
      return failure();
  }
  if (failed(emitArtifact(*module, codegen::Target::Cpu, step.artifact)))
    return failure();
  return readParams(context, modelPath, step);
}

//===----------------------------------------------------------------------===//
// The check
//===----------------------------------------------------------------------===//

/// Random numbers that are the same on every platform for a seed
/// (std::mt19937_64's sequence is specified; the standard distributions are
/// not).
class Random {
public:
  explicit Random(uint64_t seed) : engine(seed) {}
  /// Uniform in [0, 1).
  double uniform() { return (engine() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller).
  double normal() {
    double radius = std::sqrt(-2.0 * std::log(1.0 - uniform()));
    return radius * std::cos(2.0 * M_PI * uniform());
  }
  /// Uniform in [0, n).
  int64_t below(int64_t n) { return static_cast<int64_t>(engine() % n); }

private:
  std::mt19937_64 engine;
};

/// A random value for an input binding (see the file comment).
rt::Tensor randomInput(const rt::Binding &binding, int64_t bound,
                       Random &random) {
  rt::Tensor tensor(binding.dtype, binding.shape);
  int64_t count = tensor.numElements();
  for (int64_t i = 0; i < count; ++i) {
    switch (binding.dtype) {
    case rt::DType::Float64:
      tensor.data<double>()[i] = random.normal();
      break;
    case rt::DType::Int64:
      tensor.data<int64_t>()[i] = random.below(bound);
      break;
    case rt::DType::Int32:
      tensor.data<int32_t>()[i] = random.below(bound);
      break;
    case rt::DType::Int8:
      tensor.data<int8_t>()[i] = random.below(std::min<int64_t>(bound, 128));
      break;
    case rt::DType::Bool:
      tensor.data<uint8_t>()[i] = random.below(2);
      break;
    default: // Float32/16 inputs do not survive ztc-promote-f64.
      break;
    }
  }
  return tensor;
}

/// The flat indices to check in a parameter of `count` elements, ascending.
std::vector<int64_t> sampleElements(int64_t count, Random &random) {
  std::set<int64_t> chosen;
  if (count <= kSampleSize) {
    for (int64_t i = 0; i < count; ++i)
      chosen.insert(i);
  } else {
    while (static_cast<int64_t>(chosen.size()) < kSampleSize)
      chosen.insert(random.below(count));
  }
  return {chosen.begin(), chosen.end()};
}

/// `[i,j,...]`: the multi-index of flat element `flat` of `shape`.
std::string formatIndex(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d)
    text += (d ? "," : "") + std::to_string(index[d]);
  return text + "]";
}

/// The outcome for one parameter.
struct ParamResult {
  std::string name;
  std::vector<int64_t> shape;
  int64_t checked = 0, count = 0;
  double worst = 0, analytic = 0, numeric = 0;
  int64_t worstIndex = 0;
};

/// Runs the session's loss entry and returns the loss.
FailureOr<double> runLoss(::ztc::bridge::StepSession &session,
                          std::string &error) {
  rt::Tensor loss;
  if (!(error = session.run(/*gradEntry=*/false)).empty() ||
      !(error = session.read(session.manifest().main().outputs.front(), loss))
           .empty())
    return failure();
  return loss.data<double>()[0];
}

/// Checks the sampled elements of the parameter in binding `index`, whose
/// compiled gradient is `grad`; restores the parameter afterwards.
FailureOr<ParamResult> checkParam(::ztc::bridge::StepSession &session,
                                  size_t index, rt::Tensor value,
                                  const rt::Tensor &grad, Random &random,
                                  std::string &error) {
  const rt::Binding &binding = session.manifest().bindings[index];
  ParamResult result;
  result.name = binding.name;
  result.shape = binding.shape;
  result.count = value.numElements();
  double *data = value.data<double>();
  for (int64_t element : sampleElements(result.count, random)) {
    double p = data[element];
    double h = kStep * std::max(1.0, std::abs(p));
    double loss[2], at[2];
    for (int side = 0; side < 2; ++side) {
      data[element] = at[side] = side == 0 ? p + h : p - h;
      if (!(error = session.setBinding(index, value)).empty())
        return failure();
      FailureOr<double> l = runLoss(session, error);
      if (failed(l))
        return failure();
      loss[side] = *l;
    }
    data[element] = p;
    double analytic = grad.data<double>()[element];
    double numeric = (loss[0] - loss[1]) / (at[0] - at[1]);
    double scale = std::max({1.0, std::abs(analytic), std::abs(numeric)});
    double relative = std::abs(analytic - numeric) / scale;
    if (result.checked == 0 || !(relative <= result.worst)) {
      result.worst = relative;
      result.worstIndex = element;
      result.analytic = analytic;
      result.numeric = numeric;
    }
    ++result.checked;
  }
  if (!(error = session.setBinding(index, value)).empty())
    return failure();
  return result;
}

/// Prints one line per parameter (sorted by name) and the summary; returns
/// whether every checked element is within `tolerance`.
bool report(ArrayRef<ParamResult> results, ArrayRef<std::string> noGrad,
            double loss, double tolerance, llvm::raw_ostream &os) {
  std::map<std::string, std::string> lines;
  size_t width = 0;
  for (const ParamResult &result : results)
    width = std::max(width, result.name.size());
  for (const std::string &name : noGrad)
    width = std::max(width, name.size());
  auto pad = [&](const std::string &name) {
    return name + std::string(width - name.size(), ' ');
  };
  const ParamResult *worst = nullptr;
  unsigned failed = 0;
  int64_t elements = 0;
  for (const ParamResult &result : results) {
    bool ok = result.worst <= tolerance;
    failed += !ok;
    elements += result.checked;
    if (!worst || !(result.worst <= worst->worst))
      worst = &result;
    lines[result.name] = llvm::formatv(
        "{0} {1}  max relative error {2:e2} at {3} (analytic {4:e6}, "
        "numeric {5:e6}), {6} of {7} elements",
        ok ? "ok     " : "FAILED ", pad(result.name), result.worst,
        formatIndex(result.worstIndex, result.shape), result.analytic,
        result.numeric, result.checked, result.count);
  }
  for (const std::string &name : noGrad)
    lines[name] = "skipped " + pad(name) +
                  "  no gradient: the loss does not depend on it";
  for (auto &[name, line] : lines)
    os << line << "\n";
  os << llvm::formatv("gradcheck: loss {0:e6}, {1} parameter{2}, {3} "
                      "elements, worst relative error {4:e2}{5}, tolerance "
                      "{6:e0}: ",
                      loss, results.size(), results.size() == 1 ? "" : "s",
                      elements, worst ? worst->worst : 0.0,
                      worst ? " (" + worst->name + ")" : std::string(),
                      tolerance);
  if (failed)
    os << "FAILED (" << failed
       << (failed == 1 ? " parameter exceeds" : " parameters exceed")
       << " it)\n";
  else
    os << "ok\n";
  os.flush();
  return failed == 0;
}

/// Runs the check on the built artifact in `dir`; prints the report.
FailureOr<bool> runCheck(const std::string &dir, const CheckStep &step,
                         const GradCheckOptions &options, llvm::raw_ostream &os,
                         std::string &error) {
  ::ztc::bridge::StepSession session;
  if (!(error = session.open(dir)).empty())
    return failure();
  const rt::Manifest &manifest = session.manifest();
  Random random(options.seed);
  for (size_t i = 0; i < manifest.bindings.size(); ++i) {
    const rt::Binding &binding = manifest.bindings[i];
    if (!rt::isData(binding.role))
      continue;
    auto bound = step.indexBounds.find(binding.name);
    bool indexes = bound != step.indexBounds.end();
    rt::Tensor value =
        randomInput(binding, indexes ? bound->second : 2, random);
    // Say what the check ran on (stderr, like ztc compile's notes).
    llvm::errs() << "ztc: input '" << binding.name << "' " << binding.describe()
                 << ": ";
    if (binding.dtype == rt::DType::Float64)
      llvm::errs() << "normal(0, 1)\n";
    else if (indexes)
      llvm::errs() << "uniform in [0, " << bound->second
                   << ") (the extent it indexes)\n";
    else
      llvm::errs() << "0 or 1\n";
    if (!(error = session.setBinding(i, value)).empty())
      return failure();
  }

  for (const rt::Binding &binding : manifest.bindings)
    if (binding.role == rt::BindingRole::Hyper &&
        binding.name == rt::kRandomKeyHyper)
      llvm::errs() << "ztc: random key '" << binding.name << "': the key of "
                   << "seed " << options.seed << ", fixed for every call\n";
  if (!(error = session.setRandomKey(options.seed)).empty())
    return failure();

  // Analytic gradients, and the loss at the unperturbed parameters.
  if (!(error = session.run(/*gradEntry=*/true)).empty())
    return failure();
  std::map<std::string, rt::Tensor> grads;
  const std::vector<rt::Output> &gradOutputs =
      manifest.find(rt::EntryPurpose::LossAndGrads)->outputs;
  for (const rt::Output &output : gradOutputs)
    if (!(error = session.read(output, grads[output.name])).empty())
      return failure();
  double loss = grads[gradOutputs.front().name].data<double>()[0];
  grads.erase(gradOutputs.front().name);

  // Parameters by name (std::map), so the report and the sampling order
  // do not depend on the model's argument order.
  std::vector<ParamResult> results;
  for (auto &[name, grad] : grads) {
    size_t index = 0;
    while (index < manifest.bindings.size() &&
           !(manifest.bindings[index].name == name &&
             manifest.bindings[index].role == rt::BindingRole::Param))
      ++index;
    if (index == manifest.bindings.size()) {
      error = "the gradient '" + name + "' belongs to no parameter";
      return failure();
    }
    FailureOr<ParamResult> result =
        checkParam(session, index, step.artifact.initialValues.at(name), grad,
                   random, error);
    if (failed(result))
      return failure();
    results.push_back(std::move(*result));
  }
  return report(results, step.noGrad, loss, options.tolerance, os);
}

} // namespace

FailureOr<bool> mlir::ztc::gradCheck(MLIRContext &context, StringRef modelPath,
                                     const GradCheckOptions &options,
                                     llvm::raw_ostream &os) {
  CheckStep step;
  if (failed(compileCheck(context, modelPath, options, step)))
    return failure();
  std::string error;
  std::string dir = ::ztc::bridge::makeTemporaryDirectory(error);
  FailureOr<bool> passed = failure();
  if (!dir.empty() &&
      (error = ::ztc::bridge::writeAndBuildArtifact(dir, step.artifact))
          .empty())
    passed = runCheck(dir, step, options, os, error);
  if (!dir.empty())
    ::ztc::bridge::removeDirectory(dir);
  if (failed(passed)) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return failure();
  }
  return passed;
}
