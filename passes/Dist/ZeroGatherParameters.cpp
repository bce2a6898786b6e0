//===- ZeroGatherParameters.cpp - ztc-zero's parameter gathers ------------===//
//
// Which parameters are held in shards (stage 3 above the persistence
// threshold; at stages 1 and 2 the f32 masters of half working copies),
// and the rewrite that gives every reader of one a copy gathered right
// before it, in half where the reader wants the half working copy.
//
//===----------------------------------------------------------------------===//

#include "passes/Dist/ZeroInternal.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::zero;

bool Rewriter::shardsParameter(func::FuncOp func, unsigned index) {
  auto type = dyn_cast<RankedTensorType>(func.getArgument(index).getType());
  if (!type || !train::hasRole(func, index, train::BindingRole::Param))
    return false;
  if (stage == ZeroStage::Parameters)
    return type.getNumElements() >= int64_t(paramPersistenceThreshold);
  return (stage == ZeroStage::OptimizerStates ||
          stage == ZeroStage::Gradients) &&
         worldSize > 1 && onlyNarrowed(func.getArgument(index));
}

bool Rewriter::onlyNarrowed(Value param) {
  bool narrowed = false;
  std::function<bool(Value)> walk = [&](Value value) {
    for (Operation *user : value.getUsers()) {
      if (isa<train::SgdOp, train::AdamOp, train::Adam8bitOp>(user) &&
          user->getOperand(0) == param)
        continue;
      if (isa<nn::TransposeOp, nn::ReshapeOp>(user)) {
        if (!walk(user->getResult(0)))
          return false;
        continue;
      }
      auto narrow = dyn_cast<nn::CastOp>(user);
      if (!narrow)
        return false;
      auto from = dyn_cast<FloatType>(
          cast<RankedTensorType>(value.getType()).getElementType());
      auto to = dyn_cast<FloatType>(narrow.getType().getElementType());
      if (!from || !to || to.getWidth() >= from.getWidth())
        return false;
      narrowed = true;
    }
    return true;
  };
  return walk(param) && narrowed;
}

LogicalResult Rewriter::gatherParameters(func::FuncOp func,
                                         ArrayRef<Operation *> updates,
                                         bool halfCopies) {
  // Stages 1 and 2 gather once per step: every reader shares the copy the
  // first one gathered.
  const bool once = stage < ZeroStage::Parameters;
  IRMapping shared;
  Block &body = func.getBody().front();
  // The whole type of each sharded argument.
  DenseMap<Value, RankedTensorType> wholeType;
  OpBuilder b(func.getContext());
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    if (!shardsParameter(func, i))
      continue;
    BlockArgument arg = func.getArgument(i);
    auto full = cast<RankedTensorType>(arg.getType());
    wholeType[arg] = full;
    arg.setType(
        flatType(blockOf(full.getNumElements()), full.getElementType()));
    func.setArgAttr(i, dist::DistDialect::kFullShapeAttr,
                    b.getDenseI64ArrayAttr(full.getShape()));
  }
  if (wholeType.empty())
    return success();

  // Ops computed from sharded parameters (and constants) alone.
  llvm::SetVector<Operation *> derived;
  for (Operation &op : body) {
    if (op.getNumRegions() != 0 || op.getNumResults() == 0 ||
        llvm::is_contained(updates, &op) ||
        !isa_and_nonnull<nn::NNDialect>(op.getDialect()))
      continue;
    bool fromParams = false, only = true;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (wholeType.count(operand) || (def && derived.contains(def)))
        fromParams = true;
      else if (!def || !isa<arith::ConstantOp>(def))
        only = false;
    }
    if (fromParams && only)
      derived.insert(&op);
  }

  int64_t useCount = 0;
  SmallVector<Operation *> users;
  for (Operation &op : body)
    if (!derived.contains(&op) && !llvm::is_contained(updates, &op))
      users.push_back(&op);
  for (Operation *user : users) {
    // This user's own copies: one gather per parameter, one clone per
    // derived op (at stages 1 and 2, the step's).
    IRMapping own;
    IRMapping &copies = once ? shared : own;
    Build m{b, NameLoc::get(b.getStringAttr("zero.gather"), user->getLoc())};
    // The whole parameter `full` from this rank's `block` (its element
    // type: a half copy gathers half the bytes).
    auto gatherWhole = [&](Value block, RankedTensorType full) -> Value {
      auto gather = dist::AllGatherOp::create(
          b, m.loc,
          flatType(blockOf(full.getNumElements()) * worldSize,
                   full.getElementType()),
          block, worldSize);
      // Gathers of one parameter for different uses stay apart (CSE
      // would merge them and keep the whole parameter alive between).
      gather->setAttr(dist::DistDialect::kUseAttr,
                      b.getI64IntegerAttr(useCount++));
      return m.reshape(m.slice(gather, 0, full.getNumElements()), full);
    };
    std::function<Value(Value)> materialize = [&](Value value) -> Value {
      if (Value done = copies.lookupOrNull(value))
        return done;
      if (auto it = wholeType.find(value); it != wholeType.end()) {
        Value whole = gatherWhole(value, it->second);
        copies.map(value, whole);
        return whole;
      }
      Operation *def = value.getDefiningOp();
      if (!def || !derived.contains(def))
        return value;
      // Mixed precision: a parameter's half working copy (perhaps
      // transposed or reshaped first) is cast on the block and gathered
      // in half, then laid out.
      if (auto narrow = dyn_cast<nn::CastOp>(def)) {
        SmallVector<Operation *> layout;
        Value source = narrow.getX();
        while (isa_and_nonnull<nn::TransposeOp, nn::ReshapeOp>(
                   source.getDefiningOp()) &&
               derived.contains(source.getDefiningOp())) {
          layout.push_back(source.getDefiningOp());
          source = layout.back()->getOperand(0);
        }
        Type half = narrow.getType().getElementType();
        auto it = wholeType.find(source);
        if (it != wholeType.end() && isa<FloatType>(half) &&
            half.getIntOrFloatBitWidth() <
                it->second.getElementType().getIntOrFloatBitWidth()) {
          auto blockType = cast<RankedTensorType>(source.getType());
          Value halfBlock =
              halfCopies
                  ? halfCopyOf(func, cast<BlockArgument>(source), it->second,
                               half)
                  : nn::CastOp::create(b, m.loc, blockType.clone(half), source)
                        .getResult();
          Value gathered = gatherWhole(halfBlock, it->second.clone(half));
          Value whole = m.relayout(layout, gathered);
          copies.map(value, whole);
          return whole;
        }
      }
      for (Value operand : def->getOperands())
        materialize(operand);
      Operation *clone = b.clone(*def, copies);
      return clone->getResult(cast<OpResult>(value).getResultNumber());
    };
    for (OpOperand &use : user->getOpOperands()) {
      Value value = use.get();
      Operation *def = value.getDefiningOp();
      if (!wholeType.count(value) && !(def && derived.contains(def)))
        continue;
      if (isa<func::ReturnOp>(user) && wholeType.count(value))
        return user->emitError(
            "ZeRO stage 3 cannot return a sharded parameter as it is");
      b.setInsertionPoint(user);
      use.set(materialize(value));
    }
  }
  for (Operation *op : llvm::reverse(derived)) {
    if (!op->use_empty())
      return op->emitOpError("computes from sharded parameters alone and is "
                             "still read by ")
             << (*op->user_begin())->getName()
             << " after ZeRO stage 3 gave every reader its own copy";
    op->erase();
  }
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 func.getResultTypes()));
  return success();
}

Value Rewriter::halfCopyOf(func::FuncOp func, BlockArgument param,
                           RankedTensorType full, Type half) {
  Value &copy = halfCopy[param];
  if (copy)
    return copy;
  StringRef name = train::bindingName(func, param.getArgNumber());
  std::string suffix = half.isBF16() ? ".bf16" : ".fp16";
  auto blockType = cast<RankedTensorType>(param.getType()).clone(half);
  copy = train::appendBoundArgument(func, blockType, (name + suffix).str(),
                                    train::BindingRole::State);
  Builder b(func.getContext());
  unsigned index = cast<BlockArgument>(copy).getArgNumber();
  func.setArgAttr(index, dist::DistDialect::kFullShapeAttr,
                  b.getDenseI64ArrayAttr(full.getShape()));
  func.setArgAttr(index, train::kCopyOfAttr, b.getStringAttr(name));
  return copy;
}
