//===- TrainOps.cpp - train dialect ---------------------------------------===//
//
// Registration, op verifiers and the verification of the `train.*`
// attributes on functions, their arguments and their results.
//
//===----------------------------------------------------------------------===//

#include "dialects/Train/IR/TrainOps.h"
#include "runtime/kernels/Nf4.h"

#include <cmath>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ztc::train;

#include "dialects/Train/IR/TrainOpsDialect.cpp.inc"
#include "dialects/Train/IR/TrainOpsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Train/IR/TrainOpsAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/Train/IR/TrainOps.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Train/IR/TrainOps.cpp.inc"
      >();
  registerAttributes();
}

void TrainDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Train/IR/TrainOpsAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult TrainDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kInitialAttr) {
    // A state's first value: a splat of the argument's element type, which
    // the artifact's init.safetensors carries.
    Type type = op->getRegion(regionIndex).getArgument(argIndex).getType();
    auto value = dyn_cast<DenseElementsAttr>(attr.getValue());
    auto shaped = dyn_cast<ShapedType>(type);
    if (!value || !value.isSplat() || !shaped ||
        value.getElementType() != shaped.getElementType())
      return op->emitError("'")
             << name << "' on argument " << argIndex
             << " must be a splat of the argument's element type, got "
             << attr.getValue();
    return success();
  }
  if (name == kInitialUniformAttr) {
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    auto bound = dict ? dict.getAs<FloatAttr>("bound") : nullptr;
    auto seed = dict ? dict.getAs<IntegerAttr>("seed") : nullptr;
    Type type = op->getRegion(regionIndex).getArgument(argIndex).getType();
    auto shaped = dyn_cast<ShapedType>(type);
    if (!bound || !seed || dict.size() != 2 ||
        !(bound.getValueAsDouble() >= 0.0) ||
        !std::isfinite(bound.getValueAsDouble()) || !shaped ||
        !isa<FloatType>(shaped.getElementType()))
      return op->emitError("'")
             << name << "' on argument " << argIndex
             << " must be {bound = <finite f64 >= 0>, seed = <i64>} on a "
                "float tensor, got "
             << attr.getValue();
    return success();
  }
  if (name == kFrozenAttr) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError("'") << name << "' on argument " << argIndex
                                << " must be a unit attribute";
    return success();
  }
  if (name == kNf4Attr) {
    auto shape = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    Type type = op->getRegion(regionIndex).getArgument(argIndex).getType();
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shape || shape.size() != 2 || shape[0] < 1 || shape[1] < 1 || !shaped)
      return op->emitError("'")
             << name << "' on argument " << argIndex
             << " must be array<i64: rows, cols> on a tensor, got "
             << attr.getValue();
    // The float weight itself, or its packed codes.
    int64_t n = shape[0] * shape[1];
    bool weight = isa<FloatType>(shaped.getElementType()) &&
                  shaped.getShape() == shape.asArrayRef();
    bool packed = shaped.getElementType().isSignlessInteger(8) &&
                  shaped.getShape() == ArrayRef<int64_t>{(n + 1) / 2};
    if (!weight && !packed)
      return op->emitError("'")
             << name << "' on argument " << argIndex << " (" << type
             << ") must be on the float weight of that shape or on its "
             << (n + 1) / 2 << " packed i8 codes";
    return success();
  }
  if (name == kCopyOfAttr) {
    // The param it copies, by binding name (the manifest checks the rest).
    auto source = dyn_cast<StringAttr>(attr.getValue());
    if (!source || source.getValue().empty())
      return op->emitError("'")
             << name << "' on argument " << argIndex
             << " must name a param, got " << attr.getValue();
    return success();
  }
  if (name != kBindingAttr)
    return op->emitError("unknown argument attribute '") << name << "'";
  auto binding = dyn_cast<BindingAttr>(attr.getValue());
  if (!binding)
    return op->emitError("'") << name << "' on argument " << argIndex
                              << " must be a #train.binding";
  if (binding.getName().getValue().empty())
    return op->emitError("argument ") << argIndex << " has an empty name";
  // A tensor, or the buffer bufferization makes of it.
  Type type = op->getRegion(regionIndex).getArgument(argIndex).getType();
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return op->emitError("argument ")
           << argIndex << " ('" << binding.getName().getValue()
           << "') must have a static shape, got " << type;
  // A number type: the ONNX tensor types ztc imports. Which of them the
  // runtime has (no unsigned types, no i16 today) is the emitter's check,
  // so a model still imports and converts whatever it runs on.
  Type elem = shaped.getElementType();
  if (!elem.isIntOrFloat())
    return op->emitError("argument ")
           << argIndex << " ('" << binding.getName().getValue()
           << "') has element type " << elem
           << "; a binding holds integers or floats";
  if (binding.getRole() == BindingRole::Hyper && shaped.getRank() != 0)
    return op->emitError("hyper argument ")
           << argIndex << " must be rank 0, got " << type;
  // Two arguments of one name would be one binding to the runtime.
  auto func = dyn_cast<func::FuncOp>(op);
  if (func)
    for (unsigned i = 0; i < argIndex; ++i)
      if (bindingName(func, i) == binding.getName().getValue())
        return op->emitError("arguments ")
               << i << " and " << argIndex << " are both bound as '"
               << binding.getName().getValue() << "'";
  return success();
}

LogicalResult TrainDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name != kGradOfAttr && name != kUpdateOfAttr)
    return op->emitError("unknown result attribute '") << name << "'";
  auto target = dyn_cast<StringAttr>(attr.getValue());
  if (!target)
    return op->emitError("'")
           << name << "' on result " << resultIndex << " must be a string";
  if (name != kUpdateOfAttr)
    return success();
  // The updated argument exists and has the result's type: the runtime
  // writes the result into the argument's buffer.
  auto func = dyn_cast<func::FuncOp>(op);
  if (!func)
    return success();
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    if (bindingName(func, i) != target.getValue())
      continue;
    Type argType = func.getArgument(i).getType();
    Type resultType = func.getResultTypes()[resultIndex];
    if (argType != resultType)
      return op->emitError("result ")
             << resultIndex << " updates '" << target.getValue() << "' of type "
             << argType << " with a value of type " << resultType;
    return success();
  }
  return op->emitError("result ")
         << resultIndex << " updates '" << target.getValue()
         << "', which names no argument";
}

LogicalResult TrainDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kRecomputedAttr) {
    if (!isa<UnitAttr>(attr.getValue()) || isa<func::FuncOp>(op))
      return op->emitError("'") << name << "' is a unit attribute of an op";
    return success();
  }
  if (name == kFiniteCheckAttr) {
    auto check = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!check || isa<func::FuncOp>(op) ||
        !isa_and_nonnull<StringAttr>(check.get("node")) ||
        !isa_and_nonnull<StringAttr>(check.get("op")) ||
        !isa_and_nonnull<StringAttr>(check.get("pass")))
      return op->emitError("'")
             << name
             << "' is a dictionary of node, op and pass (strings) on an op";
    return success();
  }
  if (name == kHalfGradientOfAttr) {
    if (!isa<StringAttr>(attr.getValue()) || isa<func::FuncOp>(op) ||
        op->getNumResults() != 1)
      return op->emitError("'")
             << name << "' is a parameter's name on an op with one result";
    return success();
  }
  if (!isa<func::FuncOp>(op))
    return op->emitError("'") << name << "' belongs on a function";
  if (name == kLossAttr) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError("'") << name << "' must be a string";
    return success();
  }
  if (name == kClassesAttr) {
    auto classes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!classes || classes.getInt() < 1)
      return op->emitError("'") << name << "' must be a positive integer";
    return success();
  }
  if (name == kEntryAttr) {
    auto kind = dyn_cast<StringAttr>(attr.getValue());
    if (!kind || !llvm::is_contained(kEntryKinds, kind.getValue()))
      return op->emitError("'")
             << name << "' must be one of "
             << llvm::join(llvm::ArrayRef(kEntryKinds), ", ");
    return success();
  }
  if (name == kBuffersAttr || name == kNoGradAttr ||
      name == kHalfGradientsAttr) {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    if (!list || !llvm::all_of(list, llvm::IsaPred<StringAttr>))
      return op->emitError("'") << name << "' must be an array of strings";
    return success();
  }
  if (name == kPrecisionAttr) {
    auto precision = dyn_cast<StringAttr>(attr.getValue());
    if (!precision ||
        (precision.getValue() != "bf16" && precision.getValue() != "fp16"))
      return op->emitError("'") << name << "' must be \"bf16\" or \"fp16\"";
    return success();
  }
  if (name == kLoraAttr) {
    auto lora = dyn_cast<DictionaryAttr>(attr.getValue());
    auto adapters = lora ? lora.getAs<ArrayAttr>("adapters") : nullptr;
    bool ok = lora && lora.getAs<IntegerAttr>("r") &&
              lora.getAs<FloatAttr>("alpha") &&
              lora.getAs<FloatAttr>("scale") && adapters;
    for (Attribute adapter : ok ? adapters : ArrayAttr()) {
      auto fields = dyn_cast<ArrayAttr>(adapter);
      ok = ok && fields && fields.size() == 4 &&
           llvm::all_of(fields, llvm::IsaPred<StringAttr>);
    }
    if (!ok)
      return op->emitError("'")
             << name
             << "' must be a dictionary of r (integer), alpha and scale "
                "(floats) and adapters (an array of [base, A, B, layout] "
                "strings)";
    return success();
  }
  if (name == kRecomputeAttr) {
    auto report = dyn_cast<DictionaryAttr>(attr.getValue());
    auto integer = [&](StringRef key) {
      return report && isa_and_nonnull<IntegerAttr>(report.get(key));
    };
    if (!report || !isa_and_nonnull<StringAttr>(report.get("policy")) ||
        !integer("saved_bytes") || !integer("baseline_saved_bytes") ||
        !integer("recompute_flops") || !integer("recomputed_ops") ||
        !integer("step_flops"))
      return op->emitError("'")
             << name
             << "' must be a dictionary of policy (string), saved_bytes, "
                "baseline_saved_bytes, recompute_flops, recomputed_ops and "
                "step_flops (integers)";
    return success();
  }
  return op->emitError("unknown function attribute '") << name << "'";
}

void mlir::ztc::train::collectNodeNames(Location loc,
                                        SmallVectorImpl<std::string> &names) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    if (!llvm::is_contained(names, name.getName().str()))
      names.push_back(name.getName().str());
  } else if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations())
      collectNodeNames(inner, names);
  } else if (auto callSite = dyn_cast<CallSiteLoc>(loc)) {
    collectNodeNames(callSite.getCallee(), names);
  }
}

bool mlir::ztc::train::isLossType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() == 0 &&
         isa<FloatType>(tensor.getElementType());
}

BindingAttr mlir::ztc::train::getBinding(func::FuncOp func, unsigned index) {
  return func.getArgAttrOfType<BindingAttr>(index, kBindingAttr);
}

StringRef mlir::ztc::train::bindingName(func::FuncOp func, unsigned index) {
  BindingAttr binding = getBinding(func, index);
  return binding ? binding.getName().getValue() : StringRef();
}

bool mlir::ztc::train::hasRole(func::FuncOp func, unsigned index,
                               BindingRole role) {
  BindingAttr binding = getBinding(func, index);
  return binding && binding.getRole() == role;
}

BlockArgument mlir::ztc::train::findBinding(func::FuncOp func, StringRef name) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (bindingName(func, i) == name)
      return func.getArgument(i);
  return nullptr;
}

BlockArgument mlir::ztc::train::nf4WeightOf(func::FuncOp func, unsigned index) {
  StringRef name = bindingName(func, index);
  for (StringRef suffix : ::ztc::nf4::kPartSuffixes)
    if (name.ends_with(suffix))
      if (BlockArgument weight =
              findBinding(func, name.drop_back(suffix.size()));
          weight && func.getArgAttr(weight.getArgNumber(), kNf4Attr))
        return weight;
  return nullptr;
}

DictionaryAttr mlir::ztc::train::bindingAttrs(MLIRContext *context,
                                              StringRef name,
                                              BindingRole role) {
  Builder b(context);
  return b.getDictionaryAttr(b.getNamedAttr(
      kBindingAttr, BindingAttr::get(context, role, b.getStringAttr(name))));
}

Value mlir::ztc::train::appendBoundArgument(func::FuncOp func, Type type,
                                            StringRef name, BindingRole role) {
  unsigned index = func.getNumArguments();
  (void)func.insertArgument(
      index, type, bindingAttrs(func.getContext(), name, role), func.getLoc());
  return func.getArgument(index);
}

void mlir::ztc::train::setBinding(func::FuncOp func, unsigned index,
                                  StringRef name, BindingRole role) {
  func.setArgAttr(index, kBindingAttr,
                  BindingAttr::get(func.getContext(), role,
                                   StringAttr::get(func.getContext(), name)));
}

LogicalResult
mlir::ztc::train::returnUpdates(func::FuncOp func,
                                ArrayRef<std::pair<Value, Value>> updates) {
  Operation *ret = func.getBody().front().getTerminator();
  unsigned end = func.getNumResults();
  SmallVector<unsigned> indices(updates.size(), end);
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  SmallVector<Value> values;
  Builder b(func.getContext());
  for (auto [arg, value] : updates) {
    unsigned index = cast<BlockArgument>(arg).getArgNumber();
    types.push_back(value.getType());
    values.push_back(value);
    attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        kUpdateOfAttr, b.getStringAttr(bindingName(func, index)))));
  }
  if (failed(func.insertResults(indices, types, attrs)))
    return failure();
  ret->insertOperands(ret->getNumOperands(), values);
  return success();
}

Location mlir::ztc::train::gradientLoc(Location loc) {
  if (isGradientLoc(loc))
    return loc;
  MLIRContext *context = loc.getContext();
  return FusedLoc::get(context, {loc},
                       StringAttr::get(context, kGradientLocTag));
}

bool mlir::ztc::train::isGradientLoc(Location loc) {
  auto fused = dyn_cast<FusedLoc>(loc);
  auto tag =
      fused ? dyn_cast_or_null<StringAttr>(fused.getMetadata()) : nullptr;
  return tag && tag.getValue() == kGradientLocTag;
}

StringRef mlir::ztc::train::entryKind(func::FuncOp func) {
  if (auto kind = func->getAttrOfType<StringAttr>(kEntryAttr))
    return kind.getValue();
  return "";
}

double mlir::ztc::train::defaultWeightDecay(StringRef optimizer) {
  return optimizer == "adamw" || optimizer == "adamw8bit" ? 0.01 : 0.0;
}

void mlir::ztc::train::eraseUpdateResults(func::FuncOp func) {
  Operation *ret = func.getBody().back().getTerminator();
  llvm::BitVector erase(func.getNumResults());
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (func.getResultAttr(i, kUpdateOfAttr))
      erase.set(i);
  if (erase.none())
    return;
  ret->eraseOperands(erase);
  (void)func.eraseResults(erase);
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
    if (isOpTriviallyDead(&op))
      op.erase();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

/// Checks that `value` has the parameter's type `expected`.
static LogicalResult checkLikeParam(Operation *op, Value value, StringRef what,
                                    Type expected) {
  if (value.getType() != expected)
    return op->emitOpError("expects ")
           << what << " of the parameter's type " << expected << ", got "
           << value.getType();
  return success();
}

LogicalResult SgdOp::verify() {
  Type type = getParam().getType();
  if (failed(checkLikeParam(*this, getGrad(), "grad", type)) ||
      failed(checkLikeParam(*this, getNewParam(), "new_param", type)))
    return failure();
  double momentum = getMomentum().convertToDouble();
  if (momentum < 0 || getWeightDecay().convertToDouble() < 0)
    return emitOpError("expects non-negative momentum and weight_decay");
  if (getNesterov() && momentum == 0)
    return emitOpError("nesterov needs a positive momentum");
  Value buffer = getMomentumBuffer();
  Value newBuffer = getNewMomentumBuffer();
  if ((momentum > 0) != bool(buffer))
    return emitOpError(momentum > 0
                           ? "with momentum expects a momentum_buffer operand"
                           : "without momentum takes no momentum_buffer");
  if (bool(buffer) != bool(newBuffer))
    return emitOpError("returns a new momentum buffer exactly when it takes "
                       "one");
  if (buffer &&
      (failed(checkLikeParam(*this, buffer, "momentum_buffer", type)) ||
       failed(checkLikeParam(*this, newBuffer, "new_momentum_buffer", type))))
    return failure();
  return success();
}

/// Adam's attributes, as train.adam and train.adam8bit take them.
static LogicalResult checkAdamHypers(Operation *op, APFloat beta1,
                                     APFloat beta2, APFloat eps,
                                     APFloat weightDecay) {
  for (double beta : {beta1.convertToDouble(), beta2.convertToDouble()})
    if (!(beta >= 0 && beta < 1))
      return op->emitOpError("expects betas in [0, 1), got ") << beta;
  if (!(eps.convertToDouble() > 0))
    return op->emitOpError("expects a positive eps");
  if (weightDecay.convertToDouble() < 0)
    return op->emitOpError("expects a non-negative weight_decay");
  return success();
}

LogicalResult AdamOp::verify() {
  Type type = getParam().getType();
  Value likeParam[] = {getGrad(),     getExpAvg(),    getExpAvgSq(),
                       getNewParam(), getNewExpAvg(), getNewExpAvgSq()};
  StringRef names[] = {"grad",      "exp_avg",     "exp_avg_sq",
                       "new_param", "new_exp_avg", "new_exp_avg_sq"};
  for (auto [value, name] : llvm::zip(likeParam, names))
    if (failed(checkLikeParam(*this, value, name, type)))
      return failure();
  return checkAdamHypers(*this, getBeta1(), getBeta2(), getEps(),
                         getWeightDecay());
}

LogicalResult Adam8bitOp::verify() {
  auto type = cast<RankedTensorType>(getParam().getType());
  if (failed(checkLikeParam(*this, getGrad(), "grad", type)) ||
      failed(checkLikeParam(*this, getNewParam(), "new_param", type)))
    return failure();
  // bitsandbytes' block: 256 elements per scale.
  int64_t n = type.getNumElements(), blocks = train::scalesOf8bit(n);
  auto codes = RankedTensorType::get({n}, IntegerType::get(getContext(), 8));
  auto scales = RankedTensorType::get({blocks}, Float32Type::get(getContext()));
  Value asCodes[] = {getExpAvg(), getExpAvgSq(), getNewExpAvg(),
                     getNewExpAvgSq()};
  StringRef codeNames[] = {"exp_avg", "exp_avg_sq", "new_exp_avg",
                           "new_exp_avg_sq"};
  for (auto [value, name] : llvm::zip(asCodes, codeNames))
    if (value.getType() != codes)
      return emitOpError("expects ")
             << name << " of " << codes << " (a code per element), got "
             << value.getType();
  Value asScales[] = {getExpAvgAbsmax(), getExpAvgSqAbsmax(),
                      getNewExpAvgAbsmax(), getNewExpAvgSqAbsmax()};
  StringRef scaleNames[] = {"exp_avg_absmax", "exp_avg_sq_absmax",
                            "new_exp_avg_absmax", "new_exp_avg_sq_absmax"};
  for (auto [value, name] : llvm::zip(asScales, scaleNames))
    if (value.getType() != scales)
      return emitOpError("expects ")
             << name << " of " << scales << " (a scale per 256 elements), got "
             << value.getType();
  return checkAdamHypers(*this, getBeta1(), getBeta2(), getEps(),
                         getWeightDecay());
}

SmallVector<std::pair<Value, Value>> Adam8bitOp::replacedOperands() {
  return {{getNewParam(), getParam()},
          {getNewExpAvg(), getExpAvg()},
          {getNewExpAvgAbsmax(), getExpAvgAbsmax()},
          {getNewExpAvgSq(), getExpAvgSq()},
          {getNewExpAvgSqAbsmax(), getExpAvgSqAbsmax()}};
}

LogicalResult ClipByGlobalNormOp::verify() {
  if (getGrads().empty())
    return emitOpError("expects at least one gradient");
  if (getNorm().getType().getRank() != 0)
    return emitOpError("expects a scalar norm, got ") << getNorm().getType();
  if (getGrads().size() != getClipped().size())
    return emitOpError("expects one result per gradient, got ")
           << getClipped().size() << " for " << getGrads().size();
  for (auto [i, grad, clipped] : llvm::enumerate(getGrads(), getClipped()))
    if (grad.getType() != clipped.getType())
      return emitOpError("result ")
             << i << " of type " << clipped.getType()
             << " differs from its gradient's type " << grad.getType();
  if (!(getMaxNorm().convertToDouble() > 0))
    return emitOpError("expects a positive max_norm");
  return success();
}
