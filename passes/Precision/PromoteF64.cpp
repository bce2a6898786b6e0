//===- PromoteF64.cpp - the ztc-promote-f64 pass --------------------------===//
//
// Rewrites a function of nn ops to compute in double precision, so that a
// numerical check (finite differences in `ztc gradcheck`) measures the
// compiler's formulas rather than f32 rounding. See the pass description in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Interfaces/InferTypeOpInterface.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_PROMOTEF64PASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// The float element types the pass widens: every nn float type but f64.
bool isPromotable(Type element) {
  return element.isF32() || element.isF16() || element.isBF16();
}

/// `type` with an f64 element type when it is a tensor of a promotable
/// float; otherwise `type` itself.
Type promote(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !isPromotable(tensor.getElementType()))
    return type;
  return tensor.clone(Float64Type::get(type.getContext()));
}

bool needsPromotion(TypeRange types) {
  return llvm::any_of(types, [](Type type) { return promote(type) != type; });
}

/// Step 1: every op that carries a promotable tensor must be one the pass
/// knows how to re-create.
LogicalResult checkPromotable(func::FuncOp func) {
  WalkResult result = func.walk([](Operation *op) {
    if (!needsPromotion(op->getOperandTypes()) &&
        !needsPromotion(op->getResultTypes()))
      return WalkResult::advance();
    if (isa<nn::NNDialect>(op->getDialect()) || isa<func::ReturnOp>(op))
      return WalkResult::advance();
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      if (isa<DenseFPElementsAttr>(constant.getValue()))
        return WalkResult::advance();
      op->emitOpError("has a value ztc-promote-f64 cannot convert to f64: ")
          << constant.getValue();
      return WalkResult::interrupt();
    }
    SmallVector<Type> types(op->getOperandTypes());
    llvm::append_range(types, op->getResultTypes());
    Type found =
        *llvm::find_if(types, [](Type type) { return promote(type) != type; });
    op->emitOpError("computes on ")
        << found
        << "; ztc-promote-f64 promotes only nn ops, arith.constant and "
           "func.return";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

/// The constant's values as f64 (an exact conversion from f32, f16, bf16).
Value promoteConstant(OpBuilder &b, arith::ConstantOp constant) {
  auto value = cast<DenseFPElementsAttr>(constant.getValue());
  Type f64 = b.getF64Type();
  DenseElementsAttr wide = value.mapValues(f64, [](const APFloat &element) {
    APFloat converted = element;
    bool losesInfo = false;
    converted.convert(APFloat::IEEEdouble(),
                      llvm::RoundingMode::NearestTiesToEven, &losesInfo);
    return converted.bitcastToAPInt();
  });
  return arith::ConstantOp::create(b, constant.getLoc(), wide);
}

/// Re-creates the nn op `op` on its (already promoted) operands. Returns the
/// value that replaces a cast that became a no-op, or the new op's results.
FailureOr<SmallVector<Value>> promoteNNOp(OpBuilder &b, Operation *op) {
  if (auto cast = dyn_cast<nn::CastOp>(op)) {
    Type target = promote(cast.getType());
    if (cast.getX().getType() == target)
      return SmallVector<Value>{cast.getX()};
  }
  SmallVector<Type> types;
  if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    if (failed(infer.inferReturnTypes(
            op->getContext(), op->getLoc(), op->getOperands(),
            op->getAttrDictionary(), op->getPropertiesStorage(),
            op->getRegions(), types)))
      return op->emitOpError("has no valid result type on f64 operands");
  } else {
    // nn.reshape, nn.cast and nn.random_uniform: the result type is given,
    // not inferred.
    llvm::append_range(types, llvm::map_range(op->getResultTypes(), promote));
  }
  if (TypeRange(types) == op->getResultTypes())
    return SmallVector<Value>(op->getResults());
  OperationState state(op->getLoc(), op->getName(), op->getOperands(), types,
                       op->getAttrs());
  return SmallVector<Value>(b.create(state)->getResults());
}

struct PromoteF64Pass : public ztc::impl::PromoteF64PassBase<PromoteF64Pass> {
  using PromoteF64PassBase::PromoteF64PassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // A declaration has no body to compute in f64; its callers' types
    // depend on its signature.
    if (func.isExternal())
      return;
    if (failed(checkPromotable(func)))
      return signalPassFailure();

    // Step 2: arguments change type in place; their uses follow.
    for (BlockArgument arg : func.getArguments())
      arg.setType(promote(arg.getType()));

    // Step 3: ops in program order, so operands are promoted before use.
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (op != func.getOperation())
        ops.push_back(op);
    });
    OpBuilder b(func.getContext());
    for (Operation *op : ops) {
      b.setInsertionPoint(op);
      SmallVector<Value> replacements;
      if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
        if (!needsPromotion(op->getResultTypes()))
          continue;
        replacements.push_back(promoteConstant(b, constant));
      } else if (isa<nn::NNDialect>(op->getDialect())) {
        FailureOr<SmallVector<Value>> promoted = promoteNNOp(b, op);
        if (failed(promoted))
          return signalPassFailure();
        if (llvm::equal(*promoted, op->getResults()))
          continue;
        replacements = std::move(*promoted);
      } else {
        continue;
      }
      op->replaceAllUsesWith(replacements);
      op->erase();
    }

    // Step 4: the signature follows the promoted arguments and results.
    SmallVector<Type> inputs =
        llvm::map_to_vector(func.getArgumentTypes(), promote);
    SmallVector<Type> results =
        llvm::map_to_vector(func.getResultTypes(), promote);
    func.setType(FunctionType::get(func.getContext(), inputs, results));
  }
};

} // namespace
