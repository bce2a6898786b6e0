//===- ScalarBodies.h - nn elementwise ops as scalar arith/math -----------===//
//
// The scalar computation of each elementwise `nn` op, built with `arith` and
// `math` inside a kernel.elementwise body. Kept apart from the pass so the
// same definitions serve every target the emitter prints.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_CONVERSION_NNTOKERNEL_SCALARBODIES_H
#define ZTC_PASSES_CONVERSION_NNTOKERNEL_SCALARBODIES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace mlir::ztc {

/// Whether `op` is an elementwise nn op (it maps input scalars to one
/// output scalar, with numpy broadcasting).
bool isElementwiseNNOp(Operation *op);

/// Builds the scalar computation of elementwise nn `op` on `args` (one per
/// operand, in operand order) and returns the result scalar.
Value buildScalarBody(OpBuilder &b, Location loc, Operation *op,
                      ValueRange args);

} // namespace mlir::ztc

#endif // ZTC_PASSES_CONVERSION_NNTOKERNEL_SCALARBODIES_H
