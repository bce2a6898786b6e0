//===- Nf4Weights.cpp - the ztc-nf4-weights pass --------------------------===//
//
// QLoRA's storage: frozen weights ztc-lora tagged `train.nf4` become
// bitsandbytes' 4-bit NormalFloat, read by nn.matmul_nf4 products. See the
// pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "runtime/kernels/Nf4.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_NF4WEIGHTSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// A matrix product reading the weight: `op(W)` is its right operand.
struct Read {
  nn::MatMulOp matmul;
  bool transposed;
};

unsigned widthOf(Value value) {
  return cast<RankedTensorType>(value.getType())
      .getElementType()
      .getIntOrFloatBitWidth();
}

struct Nf4WeightsPass
    : public mlir::ztc::impl::Nf4WeightsPassBase<Nf4WeightsPass> {
  using Nf4WeightsPassBase::Nf4WeightsPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isDeclaration())
      return;
    SmallVector<BlockArgument> tagged;
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), train::kNf4Attr) &&
          isa<FloatType>(
              cast<RankedTensorType>(arg.getType()).getElementType()))
        tagged.push_back(arg);
    for (BlockArgument arg : tagged)
      if (failed(quantize(func, arg)))
        return signalPassFailure();
  }

  /// Collects the products reached from `value` (W, or a transpose or cast
  /// of it, `transposed` times transposed and no narrower than `narrowest`
  /// bits on the way), and the chain's ops into `chain`; fails at any other
  /// read, naming it.
  LogicalResult collect(func::FuncOp func, StringRef name, Value value,
                        bool transposed, unsigned narrowest,
                        SmallVectorImpl<Read> &reads,
                        SmallVectorImpl<Operation *> &chain) {
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (auto cast = dyn_cast<nn::CastOp>(user);
          cast && isa<FloatType>(cast.getType().getElementType())) {
        chain.push_back(user);
        if (failed(collect(func, name, cast.getResult(), transposed,
                           std::min(narrowest, widthOf(cast.getResult())),
                           reads, chain)))
          return failure();
        continue;
      }
      if (auto transpose = dyn_cast<nn::TransposeOp>(user);
          transpose && transpose.getPerm() == ArrayRef<int64_t>{1, 0}) {
        chain.push_back(user);
        if (failed(collect(func, name, transpose.getResult(), !transposed,
                           narrowest, reads, chain)))
          return failure();
        continue;
      }
      auto matmul = dyn_cast<nn::MatMulOp>(user);
      if (matmul && use.getOperandNumber() == 1) {
        if (widthOf(matmul.getResult()) > narrowest)
          return matmul.emitError("--base-dtype nf4: '")
                 << name << "' is rounded to " << narrowest
                 << " bits before this " << widthOf(matmul.getResult())
                 << "-bit product reads it (--half-weights?); NF4 weights "
                    "are read in the product's own type";
        reads.push_back({matmul, transposed});
        continue;
      }
      return user->emitError("--base-dtype nf4: '")
             << name << "' is read by " << user->getName()
             << ", not only by matrix products, so it cannot be held in 4 "
                "bits";
    }
    return success();
  }

  LogicalResult quantize(func::FuncOp func, BlockArgument weight) {
    unsigned index = weight.getArgNumber();
    std::string name = train::bindingName(func, index).str();
    ArrayRef<int64_t> shape =
        func.getArgAttrOfType<DenseI64ArrayAttr>(index, train::kNf4Attr)
            .asArrayRef();
    auto type = cast<RankedTensorType>(weight.getType());
    SmallVector<Read> reads;
    SmallVector<Operation *> chain;
    if (failed(collect(func, name, weight, false,
                       type.getElementType().getIntOrFloatBitWidth(), reads,
                       chain)))
      return failure();

    // The parts (runtime/kernels/Nf4.h), frozen as the weight was.
    MLIRContext *ctx = func.getContext();
    OpBuilder b(ctx);
    int64_t n = shape[0] * shape[1];
    ::ztc::nf4::PartElements elements = ::ztc::nf4::partElements(n);
    auto i8 = IntegerType::get(ctx, 8);
    Type f32 = Float32Type::get(ctx);
    std::pair<int64_t, Type> parts[] = {{elements.absmax, i8},
                                        {elements.nestedAbsmax, f32},
                                        {elements.offset, f32}};
    SmallVector<Value> operands;
    weight.setType(RankedTensorType::get({::ztc::nf4::packedBytes(n)}, i8));
    operands.push_back(weight);
    for (auto [suffix, part] : llvm::zip(::ztc::nf4::kPartSuffixes, parts)) {
      std::string partName = name + suffix;
      if (train::findBinding(func, partName))
        return func.emitError("--base-dtype nf4: the model already has a "
                              "tensor named '")
               << partName << "'";
      operands.push_back(train::appendBoundArgument(
          func, RankedTensorType::get({part.first}, part.second), partName,
          train::BindingRole::Param));
      func.setArgAttr(func.getNumArguments() - 1, train::kFrozenAttr,
                      UnitAttr::get(ctx));
    }
    func.setType(FunctionType::get(ctx, func.getBody().getArgumentTypes(),
                                   func.getResultTypes()));

    // Each product reads the parts; the chain goes.
    for (Read read : reads) {
      b.setInsertionPoint(read.matmul);
      auto product = nn::MatMulNf4Op::create(
          b, read.matmul.getLoc(), read.matmul.getA(), operands[0], operands[1],
          operands[2], operands[3], b.getDenseI64ArrayAttr(shape),
          b.getBoolAttr(read.transposed));
      if (product.getType() != read.matmul.getType())
        return read.matmul.emitError("--base-dtype nf4: the product of '")
               << name << "' gives " << read.matmul.getType()
               << " but its NF4 form " << product.getType();
      for (NamedAttribute attr : read.matmul->getDiscardableAttrs())
        product->setAttr(attr.getName(), attr.getValue());
      read.matmul.replaceAllUsesWith(product.getResult());
      read.matmul.erase();
    }
    for (Operation *op : llvm::reverse(chain))
      op->erase();
    return success();
  }
};

} // namespace
