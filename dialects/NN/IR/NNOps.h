//===- NNOps.h - nn dialect -------------------------------------*- C++ -*-===//
//
// The nn dialect: ztc's deep-learning operators on statically shaped tensors.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_NN_IR_NNOPS_H
#define ZTC_DIALECTS_NN_IR_NNOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/NN/IR/GradientInterface.h"
#include "dialects/NN/IR/NNOpsDialect.h.inc"
#include "dialects/NN/IR/OpFacts.h"

namespace mlir::ztc::nn {

/// Verifies an op by running its result-type inference with diagnostics
/// enabled and comparing the result to the op's result types.
/// InferTypeOpInterface's own check runs later (with the regions) and adds a
/// generic "failed to infer returned types" to every problem; checking here
/// first gives one precise message and stops verification of the op.
template <typename ConcreteType>
class VerifiedByInference
    : public OpTrait::TraitBase<ConcreteType, VerifiedByInference> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    SmallVector<Type, 1> inferred;
    if (failed(ConcreteType::inferReturnTypes(
            op->getContext(), op->getLoc(),
            typename ConcreteType::Adaptor(cast<ConcreteType>(op)), inferred)))
      return failure();
    if (TypeRange(inferred) != op->getResultTypes())
      return op->emitOpError("result type ")
             << op->getResultTypes() << " differs from the inferred type "
             << inferred;
    return success();
  }
};

} // namespace mlir::ztc::nn

#define GET_OP_CLASSES
#include "dialects/NN/IR/NNOps.h.inc"

#endif // ZTC_DIALECTS_NN_IR_NNOPS_H
