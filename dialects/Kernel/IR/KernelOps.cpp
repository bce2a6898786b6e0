//===- KernelOps.cpp - kernel dialect -------------------------------------===//
//
// Registration and verifiers of the kernel dialect.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kernel/IR/KernelOps.h"

#include "llvm/ADT/SetVector.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::ztc::kernel;

#include "dialects/Kernel/IR/KernelOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/Kernel/IR/KernelOpsTypes.cpp.inc"

void KernelDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Kernel/IR/KernelOps.cpp.inc"
      >();
  registerTypes();
}

void KernelDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/Kernel/IR/KernelOpsTypes.cpp.inc"
      >();
}

LogicalResult KernelDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  // The plan's figures on a step function (ztc-convert-nn-to-kernel,
  // ztc-plan-memory).
  if (name == "kernel.arena_bytes" || name == "kernel.unplanned_bytes" ||
      name == "kernel.tensor_bytes") {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!bytes || bytes.getInt() < 0)
      return op->emitError("'") << name << "' must be a non-negative integer";
    return success();
  }
  if (name == kUnroundedAttr) {
    if (!isa<UnitAttr>(attr.getValue()) ||
        !isa_and_nonnull<ElementwiseOp, ReduceOp>(op->getParentOp()))
      return op->emitError("'") << name
                                << "' is a unit attribute of an op in a "
                                   "kernel.elementwise or kernel.reduce body";
    return success();
  }
  if (name != kStreamAttr)
    return op->emitError("unknown kernel attribute '") << name << "'";
  auto stream = dyn_cast<IntegerAttr>(attr.getValue());
  if (!stream || !stream.getType().isSignlessInteger(64) || stream.getInt() < 0)
    return op->emitError("'") << kStreamAttr << "' must be a non-negative i64";
  if (!isa<KernelDialect>(op->getDialect()))
    return op->emitError("'") << kStreamAttr << "' belongs on a kernel op";
  return success();
}

int64_t mlir::ztc::kernel::streamOf(Operation *op) {
  if (auto stream = op->getAttrOfType<IntegerAttr>(KernelDialect::kStreamAttr))
    return stream.getInt();
  return 0;
}

LogicalResult WaitOp::verify() {
  if (streamOf(getEvent().getDefiningOp()) == streamOf(*this))
    return emitOpError("waits for an event of its own stream ")
           << streamOf(*this) << ", which orders nothing";
  return success();
}

//===----------------------------------------------------------------------===//
// The library kernels
//===----------------------------------------------------------------------===//

namespace {

// Shorthands for the table: a required or optional field of a kind.
constexpr ConfigField req(llvm::StringLiteral name, ConfigKind kind) {
  return {name, kind, true};
}
constexpr ConfigField opt(llvm::StringLiteral name, ConfigKind kind) {
  return {name, kind, false};
}
constexpr ConfigKind Int = ConfigKind::Int, Bool = ConfigKind::Bool,
                     Float = ConfigKind::Float, Ints = ConfigKind::Ints,
                     String = ConfigKind::String;

// The configuration of each kernel: the attributes of the nn op it lowers
// from (ztc-convert-nn-to-kernel passes them on) plus those later passes
// set (matmul's transposes, ztc-fold-transposes).
const ConfigField kMatmul[] = {opt("transpose_a", Bool),
                               opt("transpose_b", Bool)};
// channels_last: the activations are NHWC (ztc-channels-last).
const ConfigField kConv[] = {req("strides", Ints), req("pads", Ints),
                             req("dilations", Ints), req("group", Int),
                             opt("channels_last", Bool)};
const ConfigField kConvBackwardData[] = {
    req("input_size", Ints), req("strides", Ints), req("pads", Ints),
    req("dilations", Ints),  req("group", Int),    opt("channels_last", Bool)};
const ConfigField kConvBackwardFilter[] = {
    req("kernel", Ints),    req("strides", Ints), req("pads", Ints),
    req("dilations", Ints), req("group", Int),    opt("channels_last", Bool)};
const ConfigField kMaxPool[] = {req("kernel", Ints), req("strides", Ints),
                                req("pads", Ints), req("dilations", Ints),
                                req("ceil_mode", Bool)};
const ConfigField kAvgPool[] = {req("kernel", Ints), req("strides", Ints),
                                req("pads", Ints), req("ceil_mode", Bool),
                                req("count_include_pad", Bool)};
const ConfigField kAvgPoolBackward[] = {
    req("input_size", Ints), req("kernel", Ints),
    req("strides", Ints),    req("pads", Ints),
    req("ceil_mode", Bool),  req("count_include_pad", Bool)};
const ConfigField kAxis[] = {req("axis", Int)};
const ConfigField kLayerNorm[] = {req("axis", Int), req("epsilon", Float)};
const ConfigField kBatchNorm[] = {req("epsilon", Float)};
const ConfigField kReduce[] = {req("axes", Ints), req("keepdims", Bool)};
const ConfigField kTranspose[] = {req("perm", Ints)};
const ConfigField kSlice[] = {req("starts", Ints), req("sizes", Ints),
                              req("steps", Ints)};
const ConfigField kInsertSlice[] = {req("starts", Ints), req("steps", Ints)};
const ConfigField kTrilu[] = {req("upper", Bool), req("diagonal", Int)};
const ConfigField kCopyInto[] = {req("axis", Int), req("offset", Int)};
const ConfigField kNllLoss[] = {opt("reduction", String),
                                opt("ignore_index", Int)};
const ConfigField kRandom[] = {req("stream", Int)};
const ConfigField kCollective[] = {req("world_size", Int)};
const ConfigField kMatmulNf4[] = {req("weight_shape", Ints),
                                  req("transpose_b", Bool)};
const ConfigField kAdam8bit[] = {req("beta1", Float), req("beta2", Float),
                                 req("eps", Float), req("weight_decay", Float)};

// Keep the names in step with the runtime's libraries
// (runtime/kernels/CpuKernels.h, CudaKernels.cuh): the emitter prints one
// library call per entry.
const LibraryKernel kLibrary[] = {
    {"matmul", "TT", 1, kMatmul},
    // x, then the NF4 weight: packed codes, scale codes, their scales and
    // offset (nn.matmul_nf4).
    {"matmul_nf4", "TIIFF", 1, kMatmulNf4},
    {"conv2d", "TTt", 1, kConv},
    {"max_pool2d", "T", 1, kMaxPool},
    {"avg_pool2d", "T", 1, kAvgPool},
    {"softmax", "T", 1, kAxis},
    {"log_softmax", "T", 1, kAxis},
    {"layer_norm", "TTt", 1, kLayerNorm},
    {"batch_norm", "TTTTT", 1, kBatchNorm},
    {"reduce_sum", "T", 1, kReduce},
    {"reduce_mean", "T", 1, kReduce},
    {"reduce_max", "T", 1, kReduce},
    {"transpose", "T", 1, kTranspose},
    {"slice", "T", 1, kSlice},
    {"gather", "TI", 1, kAxis},
    {"trilu", "T", 1, kTrilu},
    {"copy_into", "T", 1, kCopyInto},
    {"nll_loss", "TIt", 1, kNllLoss},
    {"random_uniform", "I", 1, kRandom},
    // Gradients.
    {"conv2d_backward_data", "TT", 1, kConvBackwardData},
    {"conv2d_backward_filter", "TT", 1, kConvBackwardFilter},
    {"layer_norm_backward", "TTT", 1, kLayerNorm},
    {"max_pool2d_backward", "TT", 1, kMaxPool},
    {"avg_pool2d_backward", "T", 1, kAvgPoolBackward},
    {"scatter_add", "TIT", 1, kAxis},
    {"insert_slice", "TT", 1, kInsertSlice},
    // Collectives (the dist dialect), on the context's communicator.
    {"all_reduce", "T", 1, kCollective},
    {"reduce_scatter", "T", 1, kCollective},
    {"all_gather", "T", 1, kCollective},
    {"shard", "T", 1, kCollective},
    // param, grad, then each moment's codes (i8) and scales; lr, step. Out:
    // the parameter, the codes and the scales (train.adam8bit).
    {"adam8bit", "TTITITTT", 5, kAdam8bit},
};

const char *kindName(ConfigKind kind) {
  switch (kind) {
  case ConfigKind::Int:
    return "an integer";
  case ConfigKind::Bool:
    return "a bool";
  case ConfigKind::Float:
    return "a float";
  case ConfigKind::Ints:
    return "an i64 array";
  case ConfigKind::String:
    return "a string";
  }
  return "";
}

bool hasKind(Attribute attr, ConfigKind kind) {
  switch (kind) {
  case ConfigKind::Int:
    return isa<IntegerAttr>(attr) && !isa<BoolAttr>(attr);
  case ConfigKind::Bool:
    return isa<BoolAttr>(attr);
  case ConfigKind::Float:
    return isa<FloatAttr>(attr);
  case ConfigKind::Ints:
    return isa<DenseI64ArrayAttr>(attr);
  case ConfigKind::String:
    return isa<StringAttr>(attr);
  }
  return false;
}

/// The attribute `name` of a verified call, checked against its kernel's
/// declaration of `kind`; null when an optional one is absent.
Attribute configAttr(CallOp call, StringRef name, ConfigKind kind) {
  const LibraryKernel *kernel = lookupLibraryKernel(call.getCallee());
  const ConfigField *field = kernel ? kernel->field(name) : nullptr;
  if (!field || field->kind != kind)
    llvm::report_fatal_error(llvm::Twine("library kernel '") +
                             call.getCallee() + "' declares no " +
                             kindName(kind) + " '" + name + "'");
  return call.getConfig().get(name);
}

} // namespace

unsigned LibraryKernel::minInputs() const {
  return llvm::count_if(inputs, [](char c) { return llvm::isUpper(c); });
}

const ConfigField *LibraryKernel::field(StringRef name) const {
  for (const ConfigField &field : config)
    if (field.name == name)
      return &field;
  return nullptr;
}

const LibraryKernel *mlir::ztc::kernel::lookupLibraryKernel(StringRef name) {
  for (const LibraryKernel &kernel : kLibrary)
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

int64_t mlir::ztc::kernel::configInt(CallOp call, StringRef name) {
  auto attr = cast_or_null<IntegerAttr>(configAttr(call, name, Int));
  return attr ? attr.getValue().getSExtValue() : 0;
}

bool mlir::ztc::kernel::configBool(CallOp call, StringRef name) {
  auto attr = cast_or_null<BoolAttr>(configAttr(call, name, Bool));
  return attr && attr.getValue();
}

double mlir::ztc::kernel::configFloat(CallOp call, StringRef name) {
  auto attr = cast_or_null<FloatAttr>(configAttr(call, name, Float));
  return attr ? attr.getValueAsDouble() : 0.0;
}

ArrayRef<int64_t> mlir::ztc::kernel::configInts(CallOp call, StringRef name) {
  auto attr = cast_or_null<DenseI64ArrayAttr>(configAttr(call, name, Ints));
  return attr ? attr.asArrayRef() : ArrayRef<int64_t>();
}

StringRef mlir::ztc::kernel::configString(CallOp call, StringRef name) {
  auto attr = cast_or_null<StringAttr>(configAttr(call, name, String));
  return attr ? attr.getValue() : StringRef();
}

bool mlir::ztc::kernel::hasConfig(CallOp call, StringRef name) {
  return static_cast<bool>(call.getConfig().get(name));
}

SmallVector<Value> mlir::ztc::kernel::writtenBuffers(Operation *op) {
  SmallVector<Value> written;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return written;
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffects(instances);
  for (const MemoryEffects::EffectInstance &effect : instances)
    if (isa<MemoryEffects::Write>(effect.getEffect()) && effect.getValue())
      written.push_back(effect.getValue());
  return written;
}

/// The group (0 outer, 1 kept, 2 inner) of each dimension of `space`; -1
/// for dimensions of size 1. Empty when the axes do not group.
static SmallVector<int> groupOf(ArrayRef<int64_t> space,
                                ArrayRef<int64_t> axes) {
  SmallVector<int> groups;
  int phase = 0;
  for (auto [d, size] : llvm::enumerate(space)) {
    bool reduced = llvm::is_contained(axes, int64_t(d));
    if (size == 1) {
      groups.push_back(-1);
      continue;
    }
    if (reduced && phase == 1)
      phase = 2;
    else if (!reduced && phase == 0)
      phase = 1;
    else if (!reduced && phase == 2)
      return {};
    groups.push_back(phase);
  }
  return groups;
}

std::optional<ReductionGroups>
mlir::ztc::kernel::reductionGroups(ArrayRef<int64_t> space,
                                   ArrayRef<int64_t> axes) {
  SmallVector<int> groups = groupOf(space, axes);
  if (groups.empty() && !space.empty())
    return std::nullopt;
  ReductionGroups result;
  int64_t *counts[] = {&result.outer, &result.kept, &result.inner};
  for (auto [d, group] : llvm::enumerate(groups))
    if (group >= 0)
      *counts[group] *= space[d];
  return result;
}

std::optional<std::array<int64_t, 3>> mlir::ztc::kernel::groupStrides(
    ArrayRef<int64_t> input, ArrayRef<int64_t> space, ArrayRef<int64_t> axes) {
  std::optional<ReductionGroups> sizes = reductionGroups(space, axes);
  if (!sizes || input.size() > space.size())
    return std::nullopt;
  SmallVector<int> groups = groupOf(space, axes);
  size_t lead = space.size() - input.size();
  // Per group: its dimensions the input has, and all its dimensions.
  int present[3] = {0, 0, 0}, total[3] = {0, 0, 0};
  for (auto [d, group] : llvm::enumerate(groups)) {
    if (group < 0)
      continue;
    ++total[group];
    if (d >= lead && input[d - lead] != 1)
      ++present[group];
  }
  bool has[3];
  for (int g = 0; g < 3; ++g) {
    if (present[g] != 0 && present[g] != total[g])
      return std::nullopt;
    has[g] = present[g] != 0;
  }
  int64_t inner = has[2] ? sizes->inner : 1;
  int64_t kept = has[1] ? sizes->kept : 1;
  return std::array<int64_t, 3>{has[0] ? kept * inner : 0, has[1] ? inner : 0,
                                has[2] ? 1 : 0};
}

Value mlir::ztc::kernel::rootBuffer(Value value) {
  while (auto view = value.getDefiningOp<ViewOp>())
    value = view.getSource();
  return value;
}

SmallVector<unsigned> mlir::ztc::kernel::writtenArguments(Operation *function) {
  llvm::SmallSetVector<unsigned, 16> written;
  function->walk([&](Operation *op) {
    for (Value value : writtenBuffers(op))
      if (auto arg = dyn_cast<BlockArgument>(rootBuffer(value)))
        if (arg.getOwner()->getParentOp() == function)
          written.insert(arg.getArgNumber());
  });
  SmallVector<unsigned> numbers(written.begin(), written.end());
  llvm::sort(numbers);
  return numbers;
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

/// Whether `from` broadcasts to `to` numpy-style.
static bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t lead = to.size() - from.size();
  for (auto [i, dim] : llvm::enumerate(from))
    if (dim != 1 && dim != to[lead + i])
      return false;
  return true;
}

LogicalResult ConstantOp::verify() {
  auto type = cast<MemRefType>(getBuffer().getType());
  auto valueType = cast<ShapedType>(getValue().getType());
  if (valueType.getShape() != type.getShape() ||
      valueType.getElementType() != type.getElementType())
    return emitOpError("value of type ")
           << valueType << " does not fit buffer " << type;
  return success();
}

LogicalResult ViewOp::verify() {
  auto from = cast<MemRefType>(getSource().getType());
  auto to = cast<MemRefType>(getResult().getType());
  if (from.getElementType() != to.getElementType() ||
      from.getNumElements() != to.getNumElements())
    return emitOpError("cannot view ")
           << from << " as " << to << ": element type and count must match";
  return success();
}

/// Checks that the body takes one scalar of each input's element type and
/// that each input broadcasts to `space` (named `spaceName` in errors).
static LogicalResult verifyBodyInputs(Operation *op, ValueRange inputs,
                                      Block &block, ArrayRef<int64_t> space,
                                      StringRef spaceName) {
  for (auto [i, input, arg] : llvm::enumerate(inputs, block.getArguments())) {
    auto type = cast<MemRefType>(input.getType());
    if (arg.getType() != type.getElementType())
      return op->emitOpError("body argument ")
             << i << " has type " << arg.getType() << ", input has "
             << type.getElementType();
    if (!broadcastsTo(type.getShape(), space))
      return op->emitOpError("input ")
             << i << " of type " << type << " does not broadcast to "
             << spaceName;
  }
  return success();
}

OperandRange ElementwiseOp::getYielded() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValues();
}

LogicalResult ElementwiseOp::verify() {
  Block &block = getBody().front();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << block.getNumArguments() << " scalars for " << getInputs().size()
           << " inputs";
  if (getOutputs().empty())
    return emitOpError("has no output");
  auto outType = cast<MemRefType>(getOutput().getType());
  std::string space;
  llvm::raw_string_ostream(space) << "'" << outType << "'";
  if (failed(verifyBodyInputs(*this, getInputs(), block, outType.getShape(),
                              space)))
    return failure();
  if (!isa<YieldOp>(block.getTerminator()))
    return emitOpError("body must end in kernel.yield");
  if (getYielded().size() != getOutputs().size())
    return emitOpError("body yields ") << getYielded().size() << " scalars for "
                                       << getOutputs().size() << " outputs";
  for (auto [i, output, yielded] :
       llvm::enumerate(getOutputs(), getYielded())) {
    auto type = cast<MemRefType>(output.getType());
    if (type.getShape() != outType.getShape())
      return emitOpError("output ")
             << i << " of type " << type << " is not the shape of output 0, "
             << outType;
    if (yielded.getType() != type.getElementType())
      return emitOpError("body yields ")
             << yielded.getType() << " for output elements of type "
             << type.getElementType();
  }
  return success();
}

Value ReduceOp::getYielded() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValues().front();
}

int64_t ReduceOp::getCount() {
  int64_t count = 1;
  for (int64_t axis : getAxes())
    count *= getSpace()[axis];
  return count;
}

LogicalResult ReduceOp::verify() {
  if (getKind() != "sum" && getKind() != "mean")
    return emitOpError("kind must be \"sum\" or \"mean\", got \"")
           << getKind() << "\"";
  ArrayRef<int64_t> space = getSpace(), axes = getAxes();
  if (llvm::any_of(space, [](int64_t d) { return d < 1; }))
    return emitOpError("space must have positive dimensions");
  if (axes.empty())
    return emitOpError("reduces no axis");
  for (auto [i, axis] : llvm::enumerate(axes))
    if (axis < 0 || axis >= int64_t(space.size()) ||
        (i > 0 && axis <= axes[i - 1]))
      return emitOpError("axes must be increasing dimensions of the ")
             << space.size() << "-d space";
  // The output: the space without the reduced dimensions, or with them 1.
  SmallVector<int64_t> kept, ones;
  for (auto [d, size] : llvm::enumerate(space)) {
    bool reduced = llvm::is_contained(axes, int64_t(d));
    ones.push_back(reduced ? 1 : size);
    if (!reduced)
      kept.push_back(size);
  }
  auto outType = cast<MemRefType>(getOutput().getType());
  if (outType.getShape() != ArrayRef<int64_t>(kept) &&
      outType.getShape() != ArrayRef<int64_t>(ones))
    return emitOpError("output ")
           << outType << " is not the space reduced along the axes";
  if (!isa<FloatType>(outType.getElementType()))
    return emitOpError("output elements must be floats, got ")
           << outType.getElementType();
  Block &block = getBody().front();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << block.getNumArguments() << " scalars for " << getInputs().size()
           << " inputs";
  if (failed(verifyBodyInputs(*this, getInputs(), block, space, "the space")))
    return failure();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield || yield.getValues().size() != 1)
    return emitOpError("body must end in a kernel.yield of one value");
  if (getYielded().getType() != outType.getElementType())
    return emitOpError("body yields ")
           << getYielded().getType() << " for output elements of type "
           << outType.getElementType();
  return success();
}

LogicalResult CallOp::verify() {
  const LibraryKernel *kernel = lookupLibraryKernel(getCallee());
  if (!kernel)
    return emitOpError("unknown library kernel '") << getCallee() << "'";
  unsigned inputs = getInputs().size();
  if (inputs < kernel->minInputs() || inputs > kernel->maxInputs() ||
      getOutputs().size() != kernel->outputs)
    return emitOpError("'")
           << getCallee() << "' takes " << kernel->minInputs() << " to "
           << kernel->maxInputs() << " inputs and " << kernel->outputs
           << " outputs, got " << inputs << " and " << getOutputs().size();
  Type elem = cast<MemRefType>(getOutputs()[0].getType()).getElementType();
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    Type type = cast<MemRefType>(input.getType()).getElementType();
    char want = llvm::toUpper(kernel->inputs[i]);
    if (want == 'T' && type != elem)
      return emitOpError("'") << getCallee() << "' input " << i << " has "
                              << type << ", expected the output's " << elem;
    if (want == 'I' && !type.isSignlessInteger())
      return emitOpError("'") << getCallee() << "' input " << i << " has "
                              << type << ", expected an integer type";
    if (want == 'F' && !isa<FloatType>(type))
      return emitOpError("'") << getCallee() << "' input " << i << " has "
                              << type << ", expected a float type";
  }
  for (NamedAttribute attr : getConfig()) {
    const ConfigField *field = kernel->field(attr.getName());
    if (!field)
      return emitOpError("'") << getCallee() << "' has no config attribute '"
                              << attr.getName().getValue() << "'";
    if (!hasKind(attr.getValue(), field->kind))
      return emitOpError("'")
             << getCallee() << "' config '" << attr.getName().getValue()
             << "' must be " << kindName(field->kind) << ", got "
             << attr.getValue();
  }
  for (const ConfigField &field : kernel->config)
    if (field.required && !getConfig().get(field.name))
      return emitOpError("'")
             << getCallee() << "' needs config '" << field.name << "'";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Kernel/IR/KernelOps.cpp.inc"
