//===- NodeConverter.h - converters from ONNX nodes to nn -------*- C++ -*-===//
//
// The conversion to `nn` is a table of converters keyed by (op type,
// since-version). A converter sees one `onnx.node` through a NodeContext,
// whose operands are already `nn` values with static shapes, and returns the
// values that replace the node's outputs. Converters live in one file per
// family of operators (elementwise, neural, shape).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_CONVERSION_ONNXTONN_NODECONVERTER_H
#define ZTC_PASSES_CONVERSION_ONNXTONN_NODECONVERTER_H

#include "dialects/NN/IR/NNOps.h"
#include "dialects/Onnx/IR/OnnxOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace mlir::ztc::onnx_to_nn {

/// A new value for a function argument, computed by the step and written
/// back after it (BatchNorm running statistics).
struct StateUpdate {
  BlockArgument arg;
  Value value;
};

/// What a converter sees of the node it converts.
class NodeContext {
public:
  NodeContext(onnx::NodeOp node, OpBuilder &builder, int64_t sinceVersion,
              SmallVectorImpl<StateUpdate> *updates = nullptr);

  /// Mutable: ODS accessors are non-const.
  mutable onnx::NodeOp node;
  OpBuilder &b;
  Location loc;
  /// The operator's since-version this node resolved to.
  int64_t since;

  /// Input `i`, or null when the node omits it (absent or `onnx.none`).
  Value input(unsigned i) const;
  /// Type of input `i`; the input must be present.
  RankedTensorType inputType(unsigned i) const;
  /// Rank of input `i`; the input must be present.
  int64_t rank(unsigned i) const { return inputType(i).getRank(); }
  /// Input `i` as a constant, or null when it is not (yet) constant.
  DenseElementsAttr constantInput(unsigned i) const;
  /// Integer values of constant input `i`; reports an error naming `what`
  /// when the input is missing or not constant.
  FailureOr<SmallVector<int64_t>> constantInts(unsigned i, StringRef what);
  /// Whether output `i` exists and is used.
  bool outputUsed(unsigned i) const;
  /// When input `i` is an initializer (a function argument tagged
  /// bound as a `param`), records `value` as its new value after the step; the
  /// function returns it tagged `train.update_of`. Otherwise does nothing.
  /// An initializer updated twice is an error.
  LogicalResult updateState(unsigned i, Value value);
  /// The node's name (its location's), or "" when it has none.
  StringRef name() const;
  /// The key of the function's random numbers (nn.random_uniform): its
  /// rank-0 i64 argument bound as the `hyper` `rng`, added at the
  /// end on first use, so the runtime writes a new key before every call.
  /// Null after an error when another argument already has that name.
  Value randomKey();

  /// ONNX attributes, with defaults.
  bool hasAttr(StringRef name) const;
  int64_t intAttr(StringRef name, int64_t otherwise) const;
  double floatAttr(StringRef name, double otherwise) const;
  std::string stringAttr(StringRef name, StringRef otherwise) const;
  std::optional<SmallVector<int64_t>> intsAttr(StringRef name) const;

  /// Starts an error at the node, prefixed with its name, op type and opset.
  InFlightDiagnostic error();

  /// Normalizes a possibly negative `axis` for `rank`, reporting an error
  /// naming `what` when it is out of range.
  FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                   StringRef what = "axis");

  /// Reports at the node a result type beyond nn::kMaxTensorElements.
  LogicalResult checkResultSizes(TypeRange types);

  /// Builds an `nn` op whose result types are inferred, folding it when its
  /// operands are constant. Shape errors found by inference become errors at
  /// the node instead of crashes; the result is null then.
  template <typename OpTy>
  Value create(ValueRange operands, ArrayRef<NamedAttribute> attrs = {}) {
    SmallVector<Type> types;
    if (failed(inferTypes(OpTy::getOperationName(), operands, attrs, types,
                          [&](std::optional<Location> at, DictionaryAttr dict,
                              SmallVectorImpl<Type> &out) {
                            return OpTy::inferReturnTypes(
                                b.getContext(), at, operands, dict,
                                /*properties=*/nullptr, /*regions=*/{}, out);
                          })))
      return nullptr;
    return createWithTypes<OpTy>(types, operands, attrs);
  }

  /// Builds an `nn` op with explicit result types (reshape, cast), folding it
  /// when possible; the verifier's complaints become errors at the node.
  /// Verified before folding: a fold may assume what the verifier checks
  /// (gather's indices are integers).
  template <typename OpTy>
  Value createWithTypes(TypeRange types, ValueRange operands,
                        ArrayRef<NamedAttribute> attrs = {}) {
    if (failed(checkResultSizes(types)))
      return nullptr;
    Operation *op = OpTy::create(b, loc, types, operands, attrs);
    if (failed(verifyCreated(op->getResult(0))))
      return nullptr;
    SmallVector<Value, 1> folded;
    if (failed(b.tryFold(op, folded)) || folded.front() == op->getResult(0))
      return op->getResult(0);
    op->erase();
    return folded.front();
  }

  /// Named attribute helpers for building ops.
  NamedAttribute attr(StringRef name, Attribute value) {
    return b.getNamedAttr(name, value);
  }
  NamedAttribute i64Attr(StringRef name, int64_t value) {
    return attr(name, b.getI64IntegerAttr(value));
  }
  NamedAttribute f64Attr(StringRef name, double value) {
    return attr(name, b.getF64FloatAttr(value));
  }
  NamedAttribute boolAttr(StringRef name, bool value) {
    return attr(name, b.getBoolAttr(value));
  }
  NamedAttribute i64ArrayAttr(StringRef name, ArrayRef<int64_t> value) {
    return attr(name, b.getDenseI64ArrayAttr(value));
  }

  /// Common building blocks.
  Value reshape(Value value, ArrayRef<int64_t> shape);
  /// `size` elements of `value` from `start` along `axis` (one nn.slice).
  Value sliceAlong(Value value, int64_t axis, int64_t start, int64_t size);
  Value scalar(Type elementType, double value);
  /// A constant i64 tensor of `shape` holding `values` (row-major).
  Value i64Constant(ArrayRef<int64_t> shape, ArrayRef<int64_t> values);
  Value castTo(Value value, Type elementType);

private:
  LogicalResult
  inferTypes(StringRef opName, ValueRange operands,
             ArrayRef<NamedAttribute> attrs, SmallVectorImpl<Type> &types,
             function_ref<LogicalResult(std::optional<Location>, DictionaryAttr,
                                        SmallVectorImpl<Type> &)>
                 infer);
  LogicalResult verifyCreated(Value result);
  std::string prefix() const;

  SmallVectorImpl<StateUpdate> *updates;
};

/// The number of elements of `shape`.
inline int64_t product(ArrayRef<int64_t> shape) {
  int64_t result = 1;
  for (int64_t dim : shape)
    result *= dim;
  return result;
}

/// Appends `value` to a converter's results; a null value means the
/// converter already reported an error.
inline LogicalResult produce(SmallVectorImpl<Value> &results, Value value) {
  results.push_back(value);
  return success(value != nullptr);
}

/// A converter fills `results` with one value per node output (null for
/// outputs that are not produced) or reports an error and fails.
using ConvertFn = LogicalResult (*)(NodeContext &ctx,
                                    SmallVectorImpl<Value> &results);

/// Converters by op type and since-version.
class ConverterRegistry {
public:
  /// Registers `fn` for every listed since-version of `opType`.
  void add(StringRef opType, std::initializer_list<int64_t> sinceVersions,
           ConvertFn fn);
  /// Registers `fn` for every since-version of `opType` from `firstSince`
  /// on, for operators whose later versions only widened their types.
  void addSince(StringRef opType, int64_t firstSince, ConvertFn fn);
  /// The converter for `opType` at `sinceVersion`, or null.
  ConvertFn lookup(StringRef opType, int64_t sinceVersion) const;
  /// Every op type with at least one converter, sorted.
  SmallVector<StringRef> opTypes() const;
  /// The since-versions of `opType` that have a converter, ascending.
  SmallVector<int64_t> sinceVersions(StringRef opType) const;

  /// The registry holding every converter ztc has.
  static const ConverterRegistry &get();

private:
  llvm::StringMap<llvm::DenseMap<int64_t, ConvertFn>> converters;
};

/// Every since-version of default-domain `opType` (empty if unknown).
SmallVector<int64_t> onnxSinceVersions(StringRef opType);

/// How many inputs and outputs a version of an operator takes, from its
/// ONNX schema (max: INT32_MAX when variadic). Optional inputs come after
/// the `minInputs` required ones.
struct OpArity {
  int64_t minInputs, maxInputs, minOutputs, maxOutputs;
  /// Bit i: input i is optional in the schema, so it may be empty ("").
  /// Bit 63 covers every input from 63 on (a variadic tail).
  uint64_t optionalInputs;

  /// "name:kind;..." (kinds f i s t F I S, x unchecked; see
  /// OnnxOpVersions.inc).
  const char *attributes;

  bool mayBeEmpty(int64_t input) const {
    return (optionalInputs >> std::min<int64_t>(input, 63)) & 1;
  }
  /// Whether the schema declares attribute `name`.
  bool declares(StringRef name) const {
    SmallVector<StringRef> entries;
    StringRef(attributes).split(entries, ';', -1, /*KeepEmpty=*/false);
    return llvm::any_of(entries, [&](StringRef entry) {
      return entry.split(':').first == name;
    });
  }
  /// The kind letter of attribute `name`, or 0 when the schema does not
  /// declare it or its kind is not checked.
  char attributeKind(StringRef name) const {
    SmallVector<StringRef> entries;
    StringRef(attributes).split(entries, ';', -1, /*KeepEmpty=*/false);
    for (StringRef entry : entries) {
      auto [declared, kind] = entry.split(':');
      if (declared == name)
        return kind == "x" ? 0 : kind.front();
    }
    return 0;
  }
};

/// The arity of `opType` at `sinceVersion`, or nothing when unknown.
std::optional<OpArity> onnxArity(StringRef opType, int64_t sinceVersion);

/// Maps an ONNX TensorProto data type to an element type, or null.
Type onnxElementType(MLIRContext *context, int64_t dataType);

/// The since-version of `opType` in effect at default-domain `opset`, or
/// nothing when ONNX defines no such operator at that opset.
std::optional<int64_t> resolveSinceVersion(StringRef opType, int64_t opset);

void addElementwiseConverters(ConverterRegistry &registry);
void addNeuralConverters(ConverterRegistry &registry);
void addShapeConverters(ConverterRegistry &registry);
void addIndexConverters(ConverterRegistry &registry);
void addAttentionConverters(ConverterRegistry &registry);

} // namespace mlir::ztc::onnx_to_nn

#endif // ZTC_PASSES_CONVERSION_ONNXTONN_NODECONVERTER_H
