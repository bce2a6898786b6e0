//===- OnnxToNN.cpp - the ztc-convert-onnx-to-nn pass ---------------------===//
//
// Drives the converters of NodeConverter.h over one function: resolves each
// node's since-version, reports every node without a converter at once, then
// converts in graph order so each converter sees static operand types.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/ShapeLimits.h"
#include "passes/Conversion/OnnxToNN/NodeConverter.h"
#include "passes/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace mlir::ztc {
#define GEN_PASS_DEF_CONVERTONNXTONNPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::onnx_to_nn;

//===----------------------------------------------------------------------===//
// Since-version resolution
//===----------------------------------------------------------------------===//

namespace {

/// One version of an operator: its since-version, arity and which inputs
/// may be empty.
struct OpVersion {
  int64_t since, minInputs, maxInputs, minOutputs, maxOutputs;
  uint64_t optionalInputs;
  const char *attributes;
};

/// Every default-domain operator's versions, from the ONNX schemas
/// (scripts/gen_onnx_op_versions.py).
const llvm::StringMap<SmallVector<OpVersion>> &opHistory() {
  static const llvm::StringMap<SmallVector<OpVersion>> history = [] {
    llvm::StringMap<SmallVector<OpVersion>> table;
#define ZTC_ONNX_OP(name, ...)                                                 \
  table[#name] = SmallVector<OpVersion> __VA_ARGS__;
#include "passes/Conversion/OnnxToNN/OnnxOpVersions.inc"
#undef ZTC_ONNX_OP
    return table;
  }();
  return history;
}

} // namespace

SmallVector<int64_t> onnx_to_nn::onnxSinceVersions(StringRef opType) {
  SmallVector<int64_t> versions;
  auto it = opHistory().find(opType);
  if (it != opHistory().end())
    for (const OpVersion &version : it->second)
      versions.push_back(version.since);
  return versions;
}

std::optional<OpArity> onnx_to_nn::onnxArity(StringRef opType,
                                             int64_t sinceVersion) {
  auto it = opHistory().find(opType);
  if (it != opHistory().end())
    for (const OpVersion &version : it->second)
      if (version.since == sinceVersion)
        return OpArity{version.minInputs,      version.maxInputs,
                       version.minOutputs,     version.maxOutputs,
                       version.optionalInputs, version.attributes};
  return std::nullopt;
}

std::optional<int64_t> onnx_to_nn::resolveSinceVersion(StringRef opType,
                                                       int64_t opset) {
  std::optional<int64_t> since;
  for (int64_t version : onnxSinceVersions(opType))
    if (version <= opset)
      since = version;
  return since;
}

Type onnx_to_nn::onnxElementType(MLIRContext *context, int64_t dataType) {
  Builder b(context);
  switch (dataType) {
  case 1: // FLOAT
    return b.getF32Type();
  case 3: // INT8
    return b.getI8Type();
  case 6: // INT32
    return b.getI32Type();
  case 7: // INT64
    return b.getI64Type();
  case 9: // BOOL
    return b.getI1Type();
  case 10: // FLOAT16
    return b.getF16Type();
  case 11: // DOUBLE
    return b.getF64Type();
  case 16: // BFLOAT16
    return b.getBF16Type();
  default:
    return nullptr;
  }
}

//===----------------------------------------------------------------------===//
// ConverterRegistry
//===----------------------------------------------------------------------===//

void ConverterRegistry::add(StringRef opType,
                            std::initializer_list<int64_t> sinceVersions,
                            ConvertFn fn) {
  for (int64_t version : sinceVersions)
    converters[opType][version] = fn;
}

void ConverterRegistry::addSince(StringRef opType, int64_t firstSince,
                                 ConvertFn fn) {
  for (int64_t version : onnxSinceVersions(opType))
    if (version >= firstSince)
      converters[opType][version] = fn;
}

ConvertFn ConverterRegistry::lookup(StringRef opType,
                                    int64_t sinceVersion) const {
  auto it = converters.find(opType);
  if (it == converters.end())
    return nullptr;
  return it->second.lookup(sinceVersion);
}

SmallVector<StringRef> ConverterRegistry::opTypes() const {
  SmallVector<StringRef> names;
  for (const auto &entry : converters)
    names.push_back(entry.getKey());
  llvm::sort(names);
  return names;
}

SmallVector<int64_t> ConverterRegistry::sinceVersions(StringRef opType) const {
  SmallVector<int64_t> versions;
  auto it = converters.find(opType);
  if (it != converters.end())
    for (const auto &entry : it->second)
      versions.push_back(entry.first);
  llvm::sort(versions);
  return versions;
}

const ConverterRegistry &ConverterRegistry::get() {
  static const ConverterRegistry registry = [] {
    ConverterRegistry r;
    addElementwiseConverters(r);
    addNeuralConverters(r);
    addShapeConverters(r);
    addIndexConverters(r);
    addAttentionConverters(r);
    return r;
  }();
  return registry;
}

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

NodeContext::NodeContext(onnx::NodeOp node, OpBuilder &builder,
                         int64_t sinceVersion,
                         SmallVectorImpl<StateUpdate> *updates)
    : node(node), b(builder), loc(node.getLoc()), since(sinceVersion),
      updates(updates) {}

Value NodeContext::input(unsigned i) const {
  if (i >= node.getInputs().size())
    return nullptr;
  Value value = node.getInputs()[i];
  return isa<NoneType>(value.getType()) ? nullptr : value;
}

RankedTensorType NodeContext::inputType(unsigned i) const {
  return cast<RankedTensorType>(input(i).getType());
}

DenseElementsAttr NodeContext::constantInput(unsigned i) const {
  Value value = input(i);
  DenseElementsAttr attr;
  if (value && matchPattern(value, m_Constant(&attr)))
    return attr;
  return nullptr;
}

FailureOr<SmallVector<int64_t>> NodeContext::constantInts(unsigned i,
                                                          StringRef what) {
  DenseElementsAttr attr = constantInput(i);
  if (!attr || !isa<IntegerType>(attr.getElementType())) {
    error() << what << " (input " << i
            << ") must be a constant integer tensor once input shapes are "
               "static";
    return failure();
  }
  SmallVector<int64_t> values;
  for (const APInt &v : attr.getValues<APInt>())
    values.push_back(v.getSExtValue());
  return values;
}

bool NodeContext::outputUsed(unsigned i) const {
  return i < node.getNumResults() && !node.getResult(i).use_empty();
}

LogicalResult NodeContext::updateState(unsigned i, Value value) {
  auto arg = dyn_cast_or_null<BlockArgument>(input(i));
  if (!updates || !value || !arg)
    return success(value != nullptr);
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  // Params, and buffers a model's metadata names (python/ztc_export.py's
  // BatchNorm running statistics).
  if (!func ||
      !(train::hasRole(func, arg.getArgNumber(), train::BindingRole::Param) ||
        train::hasRole(func, arg.getArgNumber(), train::BindingRole::Buffer)))
    return success();
  for (const StateUpdate &update : *updates)
    if (update.arg == arg)
      return error() << "initializer '"
                     << train::bindingName(func, arg.getArgNumber()) << "'"
                     << " (input " << i
                     << ") is already updated by another node";
  updates->push_back({arg, value});
  return success();
}

StringRef NodeContext::name() const {
  if (auto nameLoc = dyn_cast<NameLoc>(loc))
    return nameLoc.getName().getValue();
  return "";
}

Value NodeContext::randomKey() {
  constexpr StringLiteral kName = "rng";
  auto func = node->getParentOfType<func::FuncOp>();
  auto type = RankedTensorType::get({}, b.getI64Type());
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    if (train::bindingName(func, index) != kName)
      continue;
    if (arg.getType() == type &&
        train::hasRole(func, index, train::BindingRole::Hyper))
      return arg;
    error() << "the random key of training-mode Dropout is an argument "
               "named '"
            << kName << "', but the graph already has an input of that name ("
            << arg.getType() << ")";
    return nullptr;
  }
  unsigned index = func.getNumArguments();
  DictionaryAttr attrs =
      train::bindingAttrs(b.getContext(), kName, train::BindingRole::Hyper);
  if (failed(func.insertArgument(
          index, type, attrs,
          NameLoc::get(b.getStringAttr(kName), func.getLoc())))) {
    error() << "cannot add the random key argument '" << kName << "'";
    return nullptr;
  }
  return func.getArgument(index);
}

bool NodeContext::hasAttr(StringRef name) const {
  return static_cast<bool>(node.getAttrs().get(name));
}

int64_t NodeContext::intAttr(StringRef name, int64_t otherwise) const {
  if (auto attr = dyn_cast_or_null<IntegerAttr>(node.getAttrs().get(name)))
    return attr.getInt();
  return otherwise;
}

double NodeContext::floatAttr(StringRef name, double otherwise) const {
  if (auto attr = dyn_cast_or_null<FloatAttr>(node.getAttrs().get(name)))
    return attr.getValueAsDouble();
  return otherwise;
}

std::string NodeContext::stringAttr(StringRef name, StringRef otherwise) const {
  if (auto attr = dyn_cast_or_null<StringAttr>(node.getAttrs().get(name)))
    return attr.str();
  return otherwise.str();
}

std::optional<SmallVector<int64_t>>
NodeContext::intsAttr(StringRef name) const {
  auto attr = dyn_cast_or_null<ArrayAttr>(node.getAttrs().get(name));
  if (!attr)
    return std::nullopt;
  SmallVector<int64_t> values;
  for (Attribute element : attr)
    values.push_back(cast<IntegerAttr>(element).getInt());
  return values;
}

std::string NodeContext::prefix() const {
  std::string named;
  if (isa<NameLoc>(loc))
    named = "node '" + name().str() + "' ";
  return named + "(" + node.getOpType().str() + ", opset " +
         std::to_string(node.getOpset()) + "): ";
}

InFlightDiagnostic NodeContext::error() { return emitError(loc) << prefix(); }

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank,
                                              StringRef what) {
  if (axis < -rank || axis >= rank) {
    error() << what << " " << axis << " is out of range for rank " << rank;
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

/// Runs `fn` while collecting the diagnostics it emits into one string.
static std::string captureDiagnostics(MLIRContext *context,
                                      function_ref<void()> fn) {
  std::string messages;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
    if (!messages.empty())
      messages += "; ";
    messages += diag.str();
    return success();
  });
  fn();
  return messages;
}

LogicalResult NodeContext::inferTypes(
    StringRef opName, ValueRange operands, ArrayRef<NamedAttribute> attrs,
    SmallVectorImpl<Type> &types,
    function_ref<LogicalResult(std::optional<Location>, DictionaryAttr,
                               SmallVectorImpl<Type> &)>
        infer) {
  LogicalResult result = success();
  std::string messages = captureDiagnostics(b.getContext(), [&] {
    result = infer(loc, b.getDictionaryAttr(attrs), types);
  });
  if (succeeded(result))
    return checkResultSizes(types);
  InFlightDiagnostic diag = error() << "cannot build " << opName;
  if (!messages.empty())
    diag << ": " << messages;
  return failure();
}

LogicalResult NodeContext::checkResultSizes(TypeRange types) {
  for (auto [i, type] : llvm::enumerate(types)) {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasRank())
      continue;
    if (!nn::isWithinSizeLimit(shaped.getShape()))
      return error() << "result " << i << " would have shape "
                     << nn::describeShape(shaped.getShape())
                     << ", beyond the 2^48 elements ztc supports";
    if (!nn::isWithinRankLimit(shaped.getShape()))
      return error() << "result " << i << " would have shape "
                     << nn::describeShape(shaped.getShape())
                     << ": ztc's kernels take at most " << nn::kMaxRank
                     << " dimensions";
  }
  return success();
}

LogicalResult NodeContext::verifyCreated(Value result) {
  Operation *op = result.getDefiningOp();
  if (!op || !isa<nn::NNDialect>(op->getDialect()))
    return success();
  LogicalResult verified = success();
  std::string messages = captureDiagnostics(b.getContext(), [&] {
    verified = verify(op, /*verifyRecursively=*/false);
  });
  if (succeeded(verified))
    return success();
  error() << messages;
  op->erase();
  return failure();
}

Value NodeContext::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return createWithTypes<nn::ReshapeOp>(
      RankedTensorType::get(shape, type.getElementType()), value);
}

Value NodeContext::sliceAlong(Value value, int64_t axis, int64_t start,
                              int64_t size) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(value.getType()).getShape();
  SmallVector<int64_t> starts(shape.size(), 0), sizes(shape),
      steps(shape.size(), 1);
  starts[axis] = start;
  sizes[axis] = size;
  return create<nn::SliceOp>(value, {i64ArrayAttr("starts", starts),
                                     i64ArrayAttr("sizes", sizes),
                                     i64ArrayAttr("steps", steps)});
}

Value NodeContext::i64Constant(ArrayRef<int64_t> shape,
                               ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get(shape, b.getI64Type());
  return arith::ConstantOp::create(b, loc,
                                   DenseIntElementsAttr::get(type, values));
}

/// `value` as an int64, saturated (NaN as 0): converting a double outside
/// the range is undefined, and attribute values come from the model.
static int64_t saturatingInt(double value) {
  if (std::isnan(value))
    return 0;
  if (value >= 9223372036854775807.0)
    return INT64_MAX;
  if (value <= -9223372036854775808.0)
    return INT64_MIN;
  return static_cast<int64_t>(value);
}

Value NodeContext::scalar(Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute attr;
  if (isa<FloatType>(elementType))
    attr = DenseElementsAttr::get(type, b.getFloatAttr(elementType, value));
  else
    attr = DenseElementsAttr::get(
        type, b.getIntegerAttr(elementType, saturatingInt(value)));
  return arith::ConstantOp::create(b, loc, cast<TypedAttr>(attr));
}

Value NodeContext::castTo(Value value, Type elementType) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == elementType)
    return value;
  return createWithTypes<nn::CastOp>(type.clone(elementType), value);
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

/// Why a node cannot be converted, or nothing when it can.
std::optional<std::string> whyUnsupported(onnx::NodeOp node,
                                          const ConverterRegistry &registry,
                                          int64_t &since) {
  if (!node.getDomain().empty() && node.getDomain() != "ai.onnx")
    return "domain '" + node.getDomain().str() + "'";
  for (NamedAttribute attr : node.getAttrs())
    if (auto text = dyn_cast<StringAttr>(attr.getValue()))
      if (text.getValue().starts_with("<unsupported "))
        return "attribute '" + attr.getName().str() + "' " + text.str();
  std::optional<int64_t> resolved =
      resolveSinceVersion(node.getOpType(), node.getOpset());
  if (!resolved)
    return std::string("not an ONNX operator at this opset");
  since = *resolved;
  if (registry.lookup(node.getOpType(), since))
    return std::nullopt;
  if (llvm::is_contained(registry.opTypes(), node.getOpType()))
    return "unsupported opset version: since-version " + std::to_string(since);
  return std::string();
}

/// What the nn dialect computes with, for messages.
constexpr const char *kSupportedTypes =
    "nn supports f32, f64, f16, bf16, i64, i32, i8 and i1";

bool isSupportedElementType(Type type) {
  return type.isF32() || type.isF64() || type.isF16() || type.isBF16() ||
         type.isSignlessInteger(64) || type.isSignlessInteger(32) ||
         type.isSignlessInteger(8) || type.isSignlessInteger(1);
}

std::string nodeName(Operation *op) {
  if (auto nameLoc = dyn_cast<NameLoc>(op->getLoc()))
    return nameLoc.getName().str();
  return "<unnamed>";
}

struct ConvertOnnxToNNPass
    : public ztc::impl::ConvertOnnxToNNPassBase<ConvertOnnxToNNPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    const ConverterRegistry &registry = ConverterRegistry::get();

    // 1. Resolve every node; list all unsupported ones in one error.
    SmallVector<std::pair<onnx::NodeOp, int64_t>> nodes;
    // Op type (with why) -> node names, in order of first appearance.
    SmallVector<std::pair<std::string, SmallVector<std::string>>> unsupported;
    llvm::StringMap<unsigned> unsupportedIndex;
    Operation *firstUnsupported = nullptr;
    func.walk([&](onnx::NodeOp node) {
      int64_t since = 0;
      std::optional<std::string> why = whyUnsupported(node, registry, since);
      if (!why) {
        nodes.emplace_back(node, since);
        return;
      }
      std::string key = node.getOpType().str() + " (opset " +
                        std::to_string(node.getOpset()) +
                        (why->empty() ? "" : ", " + *why) + ")";
      auto [slot, inserted] =
          unsupportedIndex.try_emplace(key, unsupported.size());
      if (inserted)
        unsupported.emplace_back(key, SmallVector<std::string>());
      unsupported[slot->second].second.push_back("'" + nodeName(node) + "'");
      if (!firstUnsupported)
        firstUnsupported = node;
    });
    if (firstUnsupported) {
      InFlightDiagnostic diag = firstUnsupported->emitError()
                                << "unsupported ONNX operators: ";
      // One line however many: five operators, five nodes of each.
      size_t shown = 0;
      for (auto &[key, names] : unsupported) {
        if (shown == 5) {
          diag << "; and " << unsupported.size() - shown << " more";
          break;
        }
        diag << (shown++ ? "; " : "") << key << " at node"
             << (names.size() > 1 ? "s " : " ")
             << llvm::join(names.begin(),
                           names.begin() + std::min<size_t>(names.size(), 5),
                           ", ")
             << (names.size() > 5
                     ? " and " + std::to_string(names.size() - 5) + " more"
                     : "");
      }
      return signalPassFailure();
    }

    // 2. Constants and absent-input markers first, then nodes in order.
    OpBuilder builder(func.getContext());
    func.walk([&](onnx::ConstantOp op) {
      builder.setInsertionPoint(op);
      auto constant = arith::ConstantOp::create(builder, op.getLoc(),
                                                cast<TypedAttr>(op.getValue()));
      op.getResult().replaceAllUsesWith(constant);
      op.erase();
    });
    SmallVector<StateUpdate> updates;
    for (auto [node, since] : nodes) {
      builder.setInsertionPoint(node);
      if (failed(convertNode(node, since, builder, updates)))
        return signalPassFailure();
    }
    func.walk([&](onnx::NoneOp op) {
      if (op.use_empty())
        op.erase();
    });

    // 3. The signature follows the inferred types; state updates are
    // returned after the outputs.
    Operation *terminator = func.getBody().back().getTerminator();
    unsigned outputs = terminator->getNumOperands();
    for (const StateUpdate &update : updates)
      terminator->insertOperands(terminator->getNumOperands(), update.value);
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                   terminator->getOperandTypes()));
    for (auto [i, update] : llvm::enumerate(updates))
      func.setResultAttr(
          outputs + i, train::kUpdateOfAttr,
          StringAttr::get(func.getContext(),
                          train::bindingName(func, update.arg.getArgNumber())));
  }

  /// "2", "1 to 3", "at least 1": a count range as the schema gives it.
  static std::string countRange(int64_t low, int64_t high) {
    if (high == std::numeric_limits<int32_t>::max())
      return "at least " + std::to_string(low);
    if (low == high)
      return std::to_string(low);
    return std::to_string(low) + " to " + std::to_string(high);
  }

  /// Checks `node` against its operator's schema before any converter
  /// looks at it: input and output counts, required inputs present, and
  /// only declared attributes, of their declared types.
  static LogicalResult checkSchema(NodeContext &ctx, onnx::NodeOp node,
                                   int64_t since) {
    std::optional<OpArity> arity = onnxArity(node.getOpType(), since);
    if (!arity)
      return success();
    int64_t inputs = node.getInputs().size();
    if (inputs < arity->minInputs || inputs > arity->maxInputs)
      return ctx.error() << "takes "
                         << countRange(arity->minInputs, arity->maxInputs)
                         << " input" << (arity->maxInputs == 1 ? "" : "s")
                         << ", got " << inputs;
    for (int64_t i = 0; i < inputs; ++i)
      if (isa<NoneType>(node.getInputs()[i].getType()) && !arity->mayBeEmpty(i))
        return ctx.error() << "input " << i << " is required, but empty";
    int64_t outputs = node.getNumResults();
    if (outputs < arity->minOutputs || outputs > arity->maxOutputs)
      return ctx.error() << "has "
                         << countRange(arity->minOutputs, arity->maxOutputs)
                         << " output" << (arity->maxOutputs == 1 ? "" : "s")
                         << ", got " << outputs;
    // Attributes the schema declares must have its type: converters read
    // them by kind (an ints list holding a float would be misread).
    for (NamedAttribute attr : node.getAttrs()) {
      // An attribute the schema does not declare (ONNX's checker refuses
      // it): a typo or another operator's, never silently ignored.
      if (!arity->declares(attr.getName().strref()))
        return ctx.error() << "has no attribute '" << attr.getName().strref()
                           << "' at this opset";
      char kind = arity->attributeKind(attr.getName().strref());
      if (kind && !hasAttributeKind(attr.getValue(), kind))
        return ctx.error() << "attribute '" << attr.getName().strref()
                           << "' must be " << attributeKindName(kind);
    }
    return success();
  }

  /// Whether `value` (as the importer builds attributes) is of schema kind
  /// `kind` (OnnxOpVersions.inc); an empty list is any list.
  static bool hasAttributeKind(Attribute value, char kind) {
    auto list = dyn_cast<ArrayAttr>(value);
    auto all = [&](auto isKind) { return list && llvm::all_of(list, isKind); };
    switch (kind) {
    case 'i':
      return isa<IntegerAttr>(value);
    case 'f':
      return isa<FloatAttr>(value);
    case 's':
      return isa<StringAttr>(value);
    case 't':
      return isa<ElementsAttr>(value);
    case 'I':
      return all([](Attribute a) { return isa<IntegerAttr>(a); });
    case 'F':
      return all([](Attribute a) { return isa<FloatAttr>(a); });
    case 'S':
      return all([](Attribute a) { return isa<StringAttr>(a); });
    default:
      return true;
    }
  }

  static StringRef attributeKindName(char kind) {
    switch (kind) {
    case 'i':
      return "an integer (INT)";
    case 'f':
      return "a float (FLOAT)";
    case 's':
      return "a string (STRING)";
    case 't':
      return "a tensor (TENSOR)";
    case 'I':
      return "a list of integers (INTS)";
    case 'F':
      return "a list of floats (FLOATS)";
    case 'S':
      return "a list of strings (STRINGS)";
    default:
      return "of its declared type";
    }
  }

  LogicalResult convertNode(onnx::NodeOp node, int64_t since,
                            OpBuilder &builder,
                            SmallVectorImpl<StateUpdate> &updates) {
    NodeContext ctx(node, builder, since, &updates);
    if (failed(checkSchema(ctx, node, since)))
      return failure();
    for (auto [i, value] : llvm::enumerate(node.getInputs())) {
      if (isa<NoneType>(value.getType()))
        continue;
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!type || !type.hasStaticShape()) {
        ctx.error() << "input " << i << " has type " << value.getType()
                    << "; only tensors with static shapes are supported";
        return failure();
      }
      if (!isSupportedElementType(type.getElementType())) {
        ctx.error() << "input " << i << " has unsupported element type "
                    << type.getElementType() << " (" << kSupportedTypes << ")";
        return failure();
      }
    }
    SmallVector<Value> results;
    ConvertFn fn = ConverterRegistry::get().lookup(node.getOpType(), since);
    if (failed(fn(ctx, results)))
      return failure();
    results.resize(node.getNumResults());
    for (auto [i, result] : llvm::enumerate(node.getResults())) {
      if (result.use_empty())
        continue;
      if (!results[i]) {
        ctx.error() << "output " << i << " is used but not supported";
        return failure();
      }
      result.replaceAllUsesWith(results[i]);
    }
    node.erase();
    return success();
  }
};

} // namespace
