//===- ztc-opt.cpp - the ztc pass driver ----------------------------------===//
//
// mlir-opt with every ztc dialect and pass registered, for lit tests and for
// reproducing any `ztc` compilation pass by pass.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::ztc::registerAllDialects(registry);
  mlir::ztc::registerAllPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "ztc pass driver\n", registry));
}
