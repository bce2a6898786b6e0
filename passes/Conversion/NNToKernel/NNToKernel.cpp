//===- NNToKernel.cpp - the ztc-convert-nn-to-kernel pass -----------------===//
//
// Bufferizes a step function: tensors become memref buffers, each `nn` op
// writes a fresh `kernel.alloc`, elementwise ops become one-op
// kernel.elementwise bodies (ztc-fuse merges them), structured ops become
// the library calls they declare (NN_LibraryCall), reshapes become views,
// constants become kernel.constant.
// Outputs that would alias a bound buffer are copied into the arena, so the
// runtime reads every output at an arena offset.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kernel/IR/KernelOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "dialects/NN/IR/ShapeLimits.h"
#include "passes/Conversion/NNToKernel/ScalarBodies.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_CONVERTNNTOKERNELPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

MemRefType bufferType(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

/// Whether `buffer` lives in the arena: an alloc, or a view of one.
bool isArenaBuffer(Value buffer) {
  return static_cast<bool>(
      kernel::rootBuffer(buffer).getDefiningOp<kernel::AllocOp>());
}

/// One kernel.elementwise computing `op` into `output`; a null `op` copies
/// its single input.
void buildElementwise(OpBuilder &b, Location loc, Operation *op,
                      ValueRange inputs, Value output) {
  auto kernelOp = kernel::ElementwiseOp::create(b, loc, inputs, output);
  Block *body = b.createBlock(&kernelOp.getBody());
  for (Value input : inputs)
    body->addArgument(cast<MemRefType>(input.getType()).getElementType(), loc);
  b.setInsertionPointToStart(body);
  Value result = op ? buildScalarBody(b, loc, op, body->getArguments())
                    : body->getArgument(0);
  // A gradient formula's intermediates stay in float within the loop; a
  // forward op rounds each, so recomputing it gives the same bits.
  if (op && train::isGradientLoc(op->getLoc()))
    for (Operation &scalar : body->getOperations())
      scalar.setAttr(kernel::kUnroundedAttr, b.getUnitAttr());
  kernel::YieldOp::create(b, loc, result);
  b.setInsertionPointAfter(kernelOp);
}

/// The kind and world size of a dist collective; nullopt for other ops.
std::optional<std::pair<kernel::CollectiveKind, int64_t>>
collectiveOf(Operation *op) {
  using Kind = kernel::CollectiveKind;
  using Result = std::optional<std::pair<Kind, int64_t>>;
  return TypeSwitch<Operation *, Result>(op)
      .Case([](dist::AllReduceOp o) {
        return std::pair(Kind::all_reduce, int64_t(o.getWorldSize()));
      })
      .Case([](dist::ReduceScatterOp o) {
        return std::pair(Kind::reduce_scatter, int64_t(o.getWorldSize()));
      })
      .Case([](dist::AllGatherOp o) {
        return std::pair(Kind::all_gather, int64_t(o.getWorldSize()));
      })
      .Case([](dist::ShardOp o) {
        return std::pair(Kind::shard, int64_t(o.getWorldSize()));
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Converts one function; holds the tensor -> buffer map of that run.
class Bufferizer {
public:
  LogicalResult run(func::FuncOp func);

private:
  Value lookup(Value value);
  LogicalResult convert(OpBuilder &b, Operation *op);
  LogicalResult rewriteReturn(OpBuilder &b, func::ReturnOp ret);

  DenseMap<Value, Value> valueMap;
};

/// An op of the tensor level, which bufferization replaces by kernels and
/// then erases.
static bool isTensorOp(Operation *op) {
  return op->getDialect() &&
         (isa<nn::NNDialect, dist::DistDialect>(op->getDialect()) ||
          isa<arith::ConstantOp, train::RecordLossOp, train::Adam8bitOp>(op));
}

LogicalResult Bufferizer::run(func::FuncOp func) {
  Block &entry = func.getBody().front();

  // Arguments become buffers in place.
  for (BlockArgument arg : entry.getArguments())
    arg.setType(bufferType(arg.getType()));

  OpBuilder b(func.getContext());
  for (Operation &op : llvm::make_early_inc_range(entry)) {
    b.setInsertionPoint(&op);
    if (isa<func::ReturnOp>(op)) {
      if (failed(rewriteReturn(b, cast<func::ReturnOp>(op))))
        return failure();
      continue;
    }
    Operation *before = op.getPrevNode();
    if (failed(convert(b, &op)))
      return failure();
    // --check-finite: the result is scanned right after its kernels.
    if (auto check = op.getAttrOfType<DictionaryAttr>(train::kFiniteCheckAttr))
      if (Value buffer = lookup(op.getResult(0))) {
        StringRef name = cast<StringAttr>(check.get("pass")).getValue();
        std::optional<kernel::FinitePass> pass =
            kernel::symbolizeFinitePass(name);
        if (!pass)
          return op.emitOpError("'")
                 << train::kFiniteCheckAttr << "' names no pass of a step: '"
                 << name << "'";
        kernel::CheckFiniteOp::create(b, op.getLoc(), *pass, buffer,
                                      cast<StringAttr>(check.get("node")),
                                      cast<StringAttr>(check.get("op")));
      }
    // The kernels of an op ztc-recompute cloned stay marked, for memory
    // reports (their effects keep them apart already).
    if (op.hasAttr(train::kRecomputedAttr))
      for (Operation *made = before ? before->getNextNode() : &entry.front();
           made != &op; made = made->getNextNode())
        if (isa<kernel::ElementwiseOp, kernel::CallOp, kernel::CollectiveOp>(
                made))
          made->setAttr(train::kRecomputedAttr, b.getUnitAttr());
  }
  // Drop the tensor ops, last first, now that nothing reads them.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(entry)))
    if (isTensorOp(&op))
      op.erase();

  SmallVector<Type> argTypes(entry.getArgumentTypes());
  func.setType(FunctionType::get(func.getContext(), argTypes,
                                 entry.getTerminator()->getOperandTypes()));
  return success();
}

/// The buffer holding tensor `value`.
Value Bufferizer::lookup(Value value) {
  if (isa<BlockArgument>(value))
    return value;
  return valueMap.lookup(value);
}

LogicalResult Bufferizer::convert(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    auto value = dyn_cast<ElementsAttr>(constant.getValue());
    if (!value)
      return op->emitOpError("only tensor constants are supported");
    valueMap[constant.getResult()] =
        kernel::ConstantOp::create(b, loc, bufferType(value.getType()), value);
    return success();
  }
  if (auto reshape = dyn_cast<nn::ReshapeOp>(op)) {
    valueMap[reshape.getResult()] = kernel::ViewOp::create(
        b, loc, bufferType(reshape.getType()), lookup(reshape.getX()));
    return success();
  }
  if (auto record = dyn_cast<train::RecordLossOp>(op)) {
    kernel::RecordLossOp::create(b, loc, lookup(record.getLoss()));
    return success();
  }
  if (auto adam = dyn_cast<train::Adam8bitOp>(op)) {
    // The library's 8-bit step (runtime/kernels/Blockwise8bit.h): one call
    // writing the parameter, both moments' codes and their scales.
    SmallVector<Value> inputs, outputs;
    for (Value operand : adam->getOperands())
      inputs.push_back(lookup(operand));
    for (Value result : adam->getResults()) {
      Value output = kernel::AllocOp::create(
          b, loc, bufferType(result.getType()), IntegerAttr());
      valueMap[result] = output;
      outputs.push_back(output);
    }
    auto config = b.getDictionaryAttr(
        {b.getNamedAttr("beta1", adam.getBeta1Attr()),
         b.getNamedAttr("beta2", adam.getBeta2Attr()),
         b.getNamedAttr("eps", adam.getEpsAttr()),
         b.getNamedAttr("weight_decay", adam.getWeightDecayAttr())});
    kernel::CallOp::create(b, loc, "adam8bit", inputs, outputs, config);
    return success();
  }
  if (!isa_and_nonnull<nn::NNDialect, dist::DistDialect>(op->getDialect()))
    return op->emitOpError("cannot be lowered to the kernel dialect");

  SmallVector<Value> inputs;
  for (Value operand : op->getOperands())
    inputs.push_back(lookup(operand));
  // A frozen classifier's weight gradient is not computed: a fused cross
  // entropy's backward whose grad_w nothing reads runs the kernel without
  // it, and no buffer holds it.
  auto crossEntropy = dyn_cast<nn::LinearCrossEntropyBackwardOp>(op);
  bool inputGradientOnly = crossEntropy && crossEntropy.getGradW().use_empty();
  // One buffer per result: a library kernel with several outputs
  // (nn.attention_backward) writes each.
  SmallVector<Value> outputs;
  for (Value result : op->getResults()) {
    if (inputGradientOnly && result == crossEntropy.getGradW())
      continue;
    outputs.push_back(kernel::AllocOp::create(
        b, loc, bufferType(result.getType()), IntegerAttr()));
    valueMap[result] = outputs.back();
  }
  Value output = outputs.front();

  if (std::optional<std::pair<kernel::CollectiveKind, int64_t>> collective =
          collectiveOf(op)) {
    kernel::CollectiveOp::create(b, loc, collective->first, inputs.front(),
                                 output, collective->second);
    return success();
  }
  if (isElementwiseNNOp(op)) {
    buildElementwise(b, loc, op, inputs, output);
    return success();
  }
  if (auto concat = dyn_cast<nn::ConcatOp>(op)) {
    // One copy per input, each at its offset along the axis.
    int64_t offset = 0, axis = static_cast<int64_t>(concat.getAxis());
    for (Value input : inputs) {
      kernel::CallOp::create(
          b, loc, "copy_into", ValueRange{input}, ValueRange{output},
          b.getDictionaryAttr(
              {b.getNamedAttr("axis", b.getI64IntegerAttr(axis)),
               b.getNamedAttr("offset", b.getI64IntegerAttr(offset))}));
      offset += cast<MemRefType>(input.getType()).getDimSize(axis);
    }
    return success();
  }
  if (auto call = dyn_cast<nn::LibraryCallOpInterface>(op)) {
    // The op names its kernel and the attributes that configure it
    // (NN_LibraryCall in NNOps.td); a unit attribute (channels_last) is the
    // flag true, an absent optional one stays absent.
    SmallVector<NamedAttribute> config;
    for (StringRef name : call.getLibraryConfig())
      if (Attribute attr = op->getAttr(name))
        config.push_back(b.getNamedAttr(
            name, isa<UnitAttr>(attr) ? b.getBoolAttr(true) : attr));
    StringRef callee = inputGradientOnly ? "linear_cross_entropy_backward_x"
                                         : call.getLibraryCallee();
    kernel::CallOp::create(b, loc, callee, inputs, outputs,
                           b.getDictionaryAttr(config));
    return success();
  }
  // Every dist op is a collective (above); an nn op without a declared
  // library call has no kernel.
  return op->emitOpError("has no kernel in the runtime library");
}

/// The single kernel writing `alloc`, when that is its only writer.
static Operation *soleWriter(Value alloc) {
  Operation *writer = nullptr;
  for (Operation *user : alloc.getUsers()) {
    if (!llvm::is_contained(kernel::writtenBuffers(user), alloc))
      continue;
    if (writer)
      return nullptr;
    writer = user;
  }
  return writer;
}

/// Whether a kernel after `writer` reads `buffer`, or a view of it. (The
/// tensor ops still there read nothing by then: their kernels do.)
static bool readAfter(Value buffer, Operation *writer) {
  return llvm::any_of(buffer.getUsers(), [&](Operation *user) {
    if (auto view = dyn_cast<kernel::ViewOp>(user))
      return readAfter(view.getResult(), writer);
    return user != writer && !isTensorOp(user) && writer->isBeforeInBlock(user);
  });
}

/// Makes the value in `buffer` the new content of argument `target`: the
/// kernel that computes it writes straight into the argument when no later
/// kernel still reads the argument's old value, else a copy at the end does.
/// Returns the buffer that holds the value now (`target` when the alloc
/// went).
static Value updateInPlace(OpBuilder &b, Location loc, Value buffer,
                           BlockArgument target) {
  auto alloc = buffer.getDefiningOp<kernel::AllocOp>();
  Operation *writer = alloc ? soleWriter(alloc) : nullptr;
  if (writer && !readAfter(target, writer) &&
      alloc.getType() == target.getType()) {
    alloc.getResult().replaceAllUsesWith(target);
    alloc.erase();
    return target;
  }
  buildElementwise(b, loc, nullptr, buffer, target);
  return buffer;
}

LogicalResult Bufferizer::rewriteReturn(OpBuilder &b, func::ReturnOp ret) {
  auto func = ret->getParentOfType<func::FuncOp>();
  llvm::StringMap<BlockArgument> argByName;
  for (BlockArgument arg : func.getArguments())
    if (StringRef name = train::bindingName(func, arg.getArgNumber());
        !name.empty())
      argByName[name] = arg;

  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (auto [i, operand] : llvm::enumerate(ret.getOperands())) {
    Value buffer = lookup(operand);
    // Updated parameters and optimizer states go back into their own
    // buffers and are not returned.
    if (auto of =
            func.getResultAttrOfType<StringAttr>(i, train::kUpdateOfAttr)) {
      BlockArgument target = argByName.lookup(of.getValue());
      if (!target)
        return func.emitError("result ") << i << " updates '" << of.getValue()
                                         << "', which is not an argument";
      // One value may update several arguments (two accumulators that CSE
      // found equal): the later ones copy it from where it now is.
      valueMap[operand] = updateInPlace(b, ret.getLoc(), buffer, target);
      continue;
    }
    if (!isArenaBuffer(buffer)) {
      // An input, parameter or constant returned as is: copy it.
      Value copy = kernel::AllocOp::create(b, ret.getLoc(), buffer.getType(),
                                           IntegerAttr());
      buildElementwise(b, ret.getLoc(), nullptr, buffer, copy);
      buffer = copy;
    }
    results.push_back(buffer);
    resultAttrs.push_back(func.getResultAttrDict(i));
  }
  ret->setOperands(results);
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  return success();
}

struct ConvertNNToKernelPass
    : public ztc::impl::ConvertNNToKernelPassBase<ConvertNNToKernelPass> {
  void runOnOperation() override {
    // The bytes of every intermediate nn value, each as its own buffer: the
    // baseline the memory plan is measured against (the step's header).
    int64_t tensorBytes = 0;
    getOperation().walk([&](Operation *op) {
      if (isa_and_nonnull<nn::NNDialect>(op->getDialect()))
        for (Type type : op->getResultTypes())
          if (auto tensor = dyn_cast<RankedTensorType>(type))
            tensorBytes += nn::storageBytes(tensor);
    });
    getOperation()->setAttr(
        "kernel.tensor_bytes",
        Builder(&getContext()).getI64IntegerAttr(tensorBytes));
    Bufferizer bufferizer;
    if (failed(bufferizer.run(getOperation())))
      signalPassFailure();
  }
};

} // namespace
