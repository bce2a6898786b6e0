//===- Passes.td - every ztc pass --------------------------*- tablegen -*-===//
//
// The records of all ztc passes, one file per stage folder in the order
// the training pipeline first reaches each (docs/architecture.md); each
// pass has one .cpp in its folder and lit files named after its flag in
// test/lit/passes/<folder>.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_PASSES_TD
#define ZTC_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"
include "passes/Conversion/Passes.td"
include "passes/Train/Passes.td"
include "passes/Precision/Passes.td"
include "passes/Dist/Passes.td"
include "passes/Layout/Passes.td"
include "passes/Kernel/Passes.td"

#endif // ZTC_PASSES_PASSES_TD
