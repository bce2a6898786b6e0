//===- KernelOps.cpp - kernel dialect -------------------------------------===//
//
// Registration and verifiers of the kernel dialect.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kernel/IR/KernelOps.h"
#include "dialects/ElementTypes.h"

#include "runtime/kernels/AttentionShape.h"
#include "runtime/kernels/StepAbi.h"

#include "llvm/ADT/SetVector.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Support/DebugStringHelper.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/ErrorHandling.h"

#include <iterator>

using namespace mlir;
using namespace mlir::ztc::kernel;

#include "dialects/Kernel/IR/KernelEnums.cpp.inc"
#include "dialects/Kernel/IR/KernelOpsDialect.cpp.inc"
#include "dialects/Kernel/IR/KernelOpsInterfaces.cpp.inc"

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
  // ztc-plan-scratch, ztc-plan-memory).
  if (name == "kernel.arena_bytes" || name == "kernel.unplanned_bytes" ||
      name == "kernel.tensor_bytes" || name == kReservedBytesAttr ||
      name == kInputSetsAttr) {
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
  if (name == kLaunchGroupAttr) {
    auto group = dyn_cast<IntegerAttr>(attr.getValue());
    if (!group || !group.getType().isSignlessInteger(64) ||
        group.getInt() < 0 || !isa<ElementwiseOp>(op))
      return op->emitError("'")
             << name << "' is a non-negative i64 on a kernel.elementwise";
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

std::optional<int64_t> mlir::ztc::kernel::launchGroupOf(Operation *op) {
  if (auto group = op->getAttrOfType<IntegerAttr>(kLaunchGroupAttr))
    return group.getInt();
  return std::nullopt;
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

#define ZTC_FIELD(name, Kind) {#name, ConfigKind::Kind},
#define ZTC_CONFIG(Name, Fields) const ConfigField k##Name[] = {Fields};
#include "runtime/kernels/Library.def"

const LibraryKernel kLibrary[] = {
#define ZTC_KERNEL(name, cpp, inputs, outputs, Config)                         \
  {LibraryKernelId::name, #name,    #cpp, inputs, outputs,                     \
   #Config "Params",      k##Config},
#include "runtime/kernels/Library.def"
};

/// A collective kind's row of Library.def.
struct CollectiveRow {
  CollectiveKind kind;
  llvm::StringLiteral function;
  int32_t code;
};

constexpr CollectiveRow kCollectives[] = {
#define ZTC_COLLECTIVE(kind, cpp, code) {CollectiveKind::kind, #cpp, code},
#include "runtime/kernels/Library.def"
};

/// Whether the rows list the kinds in the order of their values, each with
/// its step-ABI code: ODS's CollectiveKind, Library.def and StepAbi.h agree.
constexpr bool collectiveRowsAgree() {
  if (std::size(kCollectives) != getMaxEnumValForCollectiveKind() + 1)
    return false;
  for (size_t i = 0; i < std::size(kCollectives); ++i) {
    const CollectiveRow &row = kCollectives[i];
    bool local = row.kind == CollectiveKind::shard;
    if (static_cast<size_t>(row.kind) != i ||
        row.code != (local ? -1 : static_cast<int32_t>(row.kind)))
      return false;
  }
  return true;
}
static_assert(collectiveRowsAgree(),
              "CollectiveKind (KernelOps.td) must have one row per kind in "
              "Library.def, in order, valued as the ZTC_COLLECTIVE_* code");

const char *kindName(ConfigKind kind) {
  switch (kind) {
  case ConfigKind::Int:
  case ConfigKind::MaybeInt:
  case ConfigKind::Bits:
    return "an integer";
  case ConfigKind::Bool:
  case ConfigKind::Flag:
    return "a bool";
  case ConfigKind::Float:
  case ConfigKind::MaybeFloat:
    return "a float";
  case ConfigKind::Ints:
  case ConfigKind::MaybeInts:
    return "an i64 array";
  case ConfigKind::Reduction:
    return "one of \"none\", \"sum\", \"mean\"";
  }
  return "";
}

bool hasKind(Attribute attr, ConfigKind kind) {
  switch (kind) {
  case ConfigKind::Int:
  case ConfigKind::MaybeInt:
  case ConfigKind::Bits:
    return isa<IntegerAttr>(attr) && !isa<BoolAttr>(attr);
  case ConfigKind::Bool:
  case ConfigKind::Flag:
    return isa<BoolAttr>(attr);
  case ConfigKind::Float:
  case ConfigKind::MaybeFloat:
    return isa<FloatAttr>(attr);
  case ConfigKind::Ints:
  case ConfigKind::MaybeInts:
    return isa<DenseI64ArrayAttr>(attr);
  case ConfigKind::Reduction: {
    auto text = dyn_cast<StringAttr>(attr);
    return text && llvm::is_contained({"none", "sum", "mean"}, text.getValue());
  }
  }
  return false;
}

/// Whether a field of kind `field` reads through an accessor of `kind`.
bool readsAs(ConfigKind field, ConfigKind kind) {
  if (field == kind)
    return true;
  return (kind == ConfigKind::Int &&
          (field == ConfigKind::MaybeInt || field == ConfigKind::Bits)) ||
         (kind == ConfigKind::Bool && field == ConfigKind::Flag) ||
         (kind == ConfigKind::Float && field == ConfigKind::MaybeFloat) ||
         (kind == ConfigKind::Ints && field == ConfigKind::MaybeInts);
}

/// The attribute `name` of a verified call, checked against its kernel's
/// declaration of `kind`; null when an optional one is absent.
Attribute configAttr(CallOp call, StringRef name, ConfigKind kind) {
  const LibraryKernel *kernel = lookupLibraryKernel(call.getCallee());
  const ConfigField *field = kernel ? kernel->field(name) : nullptr;
  if (!field || !readsAs(field->kind, kind))
    llvm::report_fatal_error(llvm::Twine("library kernel '") +
                             call.getCallee() + "' declares no " +
                             kindName(kind) + " '" + name + "'");
  return call.getConfig().get(name);
}

} // namespace

bool LibraryKernel::takesScratch() const {
  switch (id) {
#define ZTC_SCRATCH(name, bytes)                                               \
  case LibraryKernelId::name:                                                  \
    return true;
#include "runtime/kernels/Library.def"
  default:
    return false;
  }
}

std::optional<unsigned> LibraryKernel::inPlaceInput() const {
  switch (id) {
#define ZTC_IN_PLACE(name, input)                                              \
  case LibraryKernelId::name:                                                  \
    return input;
#include "runtime/kernels/Library.def"
  default:
    return std::nullopt;
  }
}

unsigned LibraryKernel::minInputs() const {
  return llvm::count_if(inputs, [](char c) { return llvm::isUpper(c); });
}

const ConfigField *LibraryKernel::field(StringRef name) const {
  for (const ConfigField &field : config)
    if (field.name == name)
      return &field;
  return nullptr;
}

const LibraryKernel &mlir::ztc::kernel::libraryKernelOf(CallOp call) {
  const LibraryKernel *kernel = lookupLibraryKernel(call.getCallee());
  if (!kernel)
    llvm::report_fatal_error(llvm::Twine("unverified kernel.call '") +
                             call.getCallee() + "'");
  return *kernel;
}

/// The element type of T for `call` of `kernel` (templateElementType).
static Type templateElementTypeOf(CallOp call, const LibraryKernel &kernel) {
  auto elementOf = [](Value v) {
    return cast<MemRefType>(v.getType()).getElementType();
  };
  for (auto [i, output] : llvm::enumerate(call.getOutputs()))
    if (kernel.outputs[i] == 'T')
      return elementOf(output);
  for (auto [i, input] : llvm::enumerate(call.getInputs()))
    if (llvm::toUpper(kernel.inputs[i]) == 'T')
      return elementOf(input);
  return elementOf(call.getOutputs().front());
}

Type mlir::ztc::kernel::templateElementType(CallOp call) {
  return templateElementTypeOf(call, libraryKernelOf(call));
}

const LibraryKernel &mlir::ztc::kernel::libraryKernel(LibraryKernelId id) {
  return kLibrary[static_cast<size_t>(id)];
}

bool mlir::ztc::kernel::isCallOf(Operation *op, LibraryKernelId id) {
  auto call = dyn_cast_or_null<CallOp>(op);
  if (!call)
    return false;
  const LibraryKernel *kernel = lookupLibraryKernel(call.getCallee());
  return kernel && kernel->id == id;
}

int mlir::ztc::kernel::attentionRole(Operation *op, unsigned index) {
  auto call = dyn_cast_or_null<CallOp>(op);
  if (!call)
    return -1;
  unsigned inputs = call.getInputs().size();
  if (isCallOf(call, LibraryKernelId::attention)) {
    if (index < 3)
      return ::ztc::kAttentionQ + index;
    return index == inputs ? ::ztc::kAttentionOut : -1;
  }
  if (isCallOf(call, LibraryKernelId::attention_backward)) {
    if (index < 5)
      return ::ztc::kAttentionQ + index;
    // Outputs dq, dk, dv; the scratch buffer follows them.
    return index >= inputs && index < inputs + 3
               ? ::ztc::kAttentionGradQ + (index - inputs)
               : -1;
  }
  return -1;
}

int64_t mlir::ztc::kernel::attentionStoredHeads(CallOp call, unsigned index) {
  int role = attentionRole(call, index);
  ArrayRef<int64_t> shape =
      cast<MemRefType>(call->getOperand(index).getType()).getShape();
  return shape[(configInt(call, "bthd") >> role & 1) ? 2 : 1];
}

llvm::StringLiteral mlir::ztc::kernel::collectiveFunction(CollectiveKind kind) {
  return kCollectives[static_cast<size_t>(kind)].function;
}

int32_t mlir::ztc::kernel::collectiveCode(CollectiveKind kind) {
  return kCollectives[static_cast<size_t>(kind)].code;
}

const LibraryKernel *mlir::ztc::kernel::lookupLibraryKernel(StringRef name) {
  for (const LibraryKernel &kernel : kLibrary)
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

int64_t mlir::ztc::kernel::configInt(CallOp call, StringRef name) {
  auto attr =
      cast_or_null<IntegerAttr>(configAttr(call, name, ConfigKind::Int));
  return attr ? attr.getValue().getSExtValue() : 0;
}

bool mlir::ztc::kernel::configBool(CallOp call, StringRef name) {
  auto attr = cast_or_null<BoolAttr>(configAttr(call, name, ConfigKind::Bool));
  return attr && attr.getValue();
}

double mlir::ztc::kernel::configFloat(CallOp call, StringRef name) {
  auto attr =
      cast_or_null<FloatAttr>(configAttr(call, name, ConfigKind::Float));
  return attr ? attr.getValueAsDouble() : 0.0;
}

ArrayRef<int64_t> mlir::ztc::kernel::configInts(CallOp call, StringRef name) {
  auto attr =
      cast_or_null<DenseI64ArrayAttr>(configAttr(call, name, ConfigKind::Ints));
  return attr ? attr.asArrayRef() : ArrayRef<int64_t>();
}

StringRef mlir::ztc::kernel::configString(CallOp call, StringRef name) {
  auto attr =
      cast_or_null<StringAttr>(configAttr(call, name, ConfigKind::Reduction));
  return attr ? attr.getValue() : StringRef("mean");
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

void mlir::ztc::kernel::bufferUsers(Value buffer,
                                    SmallVectorImpl<Operation *> &users) {
  for (Operation *user : buffer.getUsers()) {
    if (auto view = dyn_cast<ViewOp>(user))
      bufferUsers(view.getResult(), users);
    else
      users.push_back(user);
  }
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

ValueRange ReduceOp::getYielded() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValues();
}

int64_t ReduceOp::getCount() {
  int64_t count = 1;
  for (int64_t axis : getAxes())
    count *= getSpace()[axis];
  return count;
}

LogicalResult ReduceOp::verify() {
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
  if (getOutputs().empty())
    return emitOpError("has no output");
  auto outType = cast<MemRefType>(getOutputs().front().getType());
  for (Value output : getOutputs()) {
    auto type = cast<MemRefType>(output.getType());
    if (type.getShape() != ArrayRef<int64_t>(kept) &&
        type.getShape() != ArrayRef<int64_t>(ones))
      return emitOpError("output ")
             << type << " is not the space reduced along the axes";
    if (type.getElementType() != outType.getElementType())
      return emitOpError("outputs must share one element type, got ")
             << outType.getElementType() << " and " << type.getElementType();
  }
  if (!isa<FloatType>(outType.getElementType()))
    return emitOpError("output elements must be floats, got ")
           << outType.getElementType();
  if (Value scratch = getScratch())
    if (llvm::is_contained(getInputs(), scratch) ||
        llvm::is_contained(getOutputs(), scratch))
      return emitOpError("scratch must be a buffer of its own");
  Block &block = getBody().front();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << block.getNumArguments() << " scalars for " << getInputs().size()
           << " inputs";
  if (failed(verifyBodyInputs(*this, getInputs(), block, space, "the space")))
    return failure();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield || yield.getValues().size() != getOutputs().size())
    return emitOpError("body must end in a kernel.yield of one value per "
                       "output (")
           << getOutputs().size() << ")";
  for (Value value : getYielded())
    if (value.getType() != outType.getElementType())
      return emitOpError("body yields ")
             << value.getType() << " for output elements of type "
             << outType.getElementType();
  return success();
}

/// Whether `type` fits operand letter `letter` (Library.def) of a call
/// whose T is `elem` and whose I is `index` (null until an I is seen);
/// otherwise what it should be.
static std::optional<std::string> letterMismatch(char letter, Type type,
                                                 Type elem, Type &index) {
  switch (llvm::toUpper(letter)) {
  case 'T':
    if (type == elem)
      return std::nullopt;
    return "the kernel's T '" + debugString(elem) + "'";
  case 'C':
    if (type == mlir::ztc::computeElementType(elem))
      return std::nullopt;
    return "'" + debugString(mlir::ztc::computeElementType(elem)) +
           "', the compute type of " + "its T '" + debugString(elem) + "'";
  case 'I':
    if (!type.isSignlessInteger())
      return std::string("an integer type");
    if (!index)
      index = type;
    if (type == index)
      return std::nullopt;
    return "'" + debugString(index) + "', as the other integer operands";
  case 'K':
    return type.isSignlessInteger(64) ? std::nullopt
                                      : std::optional<std::string>("i64");
  case 'B':
    return type.isSignlessInteger(8) ? std::nullopt
                                     : std::optional<std::string>("i8");
  case 'F':
    return type.isF32() ? std::nullopt : std::optional<std::string>("f32");
  }
  return std::string("a letter Library.def defines");
}

/// Attention's windows of heads (ztc-fold-head-windows): `heads` and
/// `head_starts` come together, with one start per operand role, and every
/// operand but the mask (and the scratch) is a rank-4 buffer holding its
/// window.
static LogicalResult verifyHeadWindows(CallOp call) {
  auto heads = call.getConfig().getAs<IntegerAttr>("heads");
  auto starts = call.getConfig().getAs<DenseI64ArrayAttr>("head_starts");
  if (!heads && !starts)
    return success();
  auto error = [&]() {
    return call.emitOpError("'") << call.getCallee() << "' ";
  };
  if (!heads || !starts)
    return error() << "takes 'heads' and 'head_starts' together";
  if (starts.size() != ::ztc::kAttentionRoles)
    return error() << "needs one 'head_starts' entry per operand role ("
                   << static_cast<int64_t>(::ztc::kAttentionRoles) << "), got "
                   << starts.size();
  if (heads.getInt() < 1)
    return error() << "needs 'heads' of at least 1, got " << heads.getInt();
  for (OpOperand &operand : call->getOpOperands()) {
    int role = attentionRole(call, operand.getOperandNumber());
    if (role < 0)
      continue;
    ArrayRef<int64_t> shape =
        cast<MemRefType>(operand.get().getType()).getShape();
    if (shape.size() != 4)
      return error() << "reads windows of heads from rank-4 operands only; "
                        "operand "
                     << operand.getOperandNumber() << " has rank "
                     << shape.size();
    int64_t stored = attentionStoredHeads(call, operand.getOperandNumber());
    int64_t start = starts[role];
    if (start < 0 || start + heads.getInt() > stored)
      return error() << "operand " << operand.getOperandNumber()
                     << " has heads [0, " << stored << "), not the window ["
                     << start << ", " << start + heads.getInt() << ")";
  }
  return success();
}

LogicalResult CallOp::verify() {
  const LibraryKernel *kernel = lookupLibraryKernel(getCallee());
  if (!kernel)
    return emitOpError("unknown library kernel '") << getCallee() << "'";
  unsigned inputs = getInputs().size();
  if (inputs < kernel->minInputs() || inputs > kernel->maxInputs() ||
      getOutputs().size() != kernel->outputs.size())
    return emitOpError("'")
           << getCallee() << "' takes " << kernel->minInputs() << " to "
           << kernel->maxInputs() << " inputs and " << kernel->outputs.size()
           << " outputs, got " << inputs << " and " << getOutputs().size();
  if (getScratch() && !kernel->takesScratch())
    return emitOpError("'") << getCallee()
                            << "' takes no scratch memory (Library.def has no "
                               "ZTC_SCRATCH row for it)";
  Type elem = templateElementTypeOf(*this, *kernel);
  Type index;
  auto check = [&](StringRef side, unsigned i, Value v,
                   char letter) -> LogicalResult {
    Type type = cast<MemRefType>(v.getType()).getElementType();
    if (std::optional<std::string> want =
            letterMismatch(letter, type, elem, index))
      return emitOpError("'") << getCallee() << "' " << side << " " << i
                              << " has " << type << ", expected " << *want;
    return success();
  };
  for (auto [i, input] : llvm::enumerate(getInputs()))
    if (failed(check("input", i, input, kernel->inputs[i])))
      return failure();
  for (auto [i, output] : llvm::enumerate(getOutputs()))
    if (failed(check("output", i, output, kernel->outputs[i])))
      return failure();
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
    if (field.required() && !getConfig().get(field.name))
      return emitOpError("'")
             << getCallee() << "' needs config '" << field.name << "'";
  if (kernel->id == LibraryKernelId::attention ||
      kernel->id == LibraryKernelId::attention_backward)
    return verifyHeadWindows(*this);
  return success();
}

LogicalResult CollectiveOp::verify() {
  auto in = cast<MemRefType>(getInput().getType());
  auto out = cast<MemRefType>(getOutput().getType());
  StringRef kind = stringifyCollectiveKind(getKind());
  if (in.getElementType() != out.getElementType())
    return emitOpError("'")
           << kind << "' changes the element type from " << in.getElementType()
           << " to " << out.getElementType();
  int64_t world = getWorldSize();
  if (world < 1)
    return emitOpError("world_size must be at least 1, got ") << world;
  // The runtime's functions take the smaller side's count n and move n
  // (all_reduce) or world_size blocks of n (Collectives.h).
  int64_t inCount = in.getNumElements(), outCount = out.getNumElements();
  switch (getKind()) {
  case CollectiveKind::all_reduce:
    if (inCount != outCount)
      return emitOpError("'all_reduce' writes as many elements as it reads, "
                         "got ")
             << inCount << " in and " << outCount << " out";
    break;
  case CollectiveKind::reduce_scatter:
  case CollectiveKind::shard:
    if (inCount != outCount * world)
      return emitOpError("'")
             << kind << "' reads " << world << " blocks of its output's "
             << outCount << " elements (" << outCount * world << "), got "
             << inCount;
    break;
  case CollectiveKind::all_gather:
    if (outCount != inCount * world)
      return emitOpError("'all_gather' writes ")
             << world << " blocks of its input's " << inCount << " elements ("
             << inCount * world << "), got " << outCount;
    break;
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Kernel/IR/KernelOps.cpp.inc"
