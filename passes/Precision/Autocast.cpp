//===- Autocast.cpp - the ztc-autocast pass -------------------------------===//
//
// Mixed precision as a rewrite of the model's nn function: every op gets a
// compute type from the autocast class it declares (NN_HalfCompute and the
// others in dialects/NN/IR/OpFacts.td: half for matrix products and
// convolutions, f32 for the ops half precision ruins, the widest of its
// activation operands for the rest) and casts are inserted where types
// change. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Arithmetic.h"
#include "passes/Passes.h"

#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Regex.h"

#include <functional>
#include <optional>

namespace mlir::ztc {
#define GEN_PASS_DEF_AUTOCASTPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

using nn::ComputeClass;

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

Type elementOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

unsigned widthOf(Type element) { return element.getIntOrFloatBitWidth(); }

struct AutocastPass : public ztc::impl::AutocastPassBase<AutocastPass> {
  using AutocastPassBase::AutocastPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    MLIRContext *context = &getContext();
    Type half = precision == HalfType::Fp16 ? Type(Float16Type::get(context))
                                            : Type(BFloat16Type::get(context));
    std::optional<llvm::Regex> keep;
    if (!keepFp32.empty()) {
      keep.emplace(keepFp32);
      std::string error;
      if (!keep->isValid(error)) {
        func.emitError("--keep-fp32 '")
            << keepFp32 << "' is not a valid regular expression: " << error;
        return signalPassFailure();
      }
    }

    // Activations: what depends on the step's data (arguments that are not
    // parameters or buffers). Only they decide a Follow op's type.
    DenseSet<Value> data;
    for (BlockArgument arg : func.getArguments()) {
      train::BindingAttr binding = train::getBinding(func, arg.getArgNumber());
      if (!binding || (binding.getRole() != train::BindingRole::Param &&
                       binding.getRole() != train::BindingRole::Buffer))
        data.insert(arg);
    }

    Block &block = func.getBody().front();
    OpBuilder b(context);
    // One cast per value and type: a weight is cast once per step, right
    // after it is defined (at the entry for an argument).
    DenseMap<std::pair<Value, Type>, Value> casts;
    std::function<Value(Value, Type)> castTo = [&](Value value,
                                                   Type element) -> Value {
      if (elementOf(value) == element)
        return value;
      // Narrowing a widened value gives back what was widened, exactly.
      if (auto widened = value.getDefiningOp<nn::CastOp>();
          widened && elementOf(widened.getX()) == element &&
          isa<FloatType>(element) &&
          widthOf(element) < widthOf(elementOf(value)))
        return widened.getX();
      auto key = std::make_pair(value, element);
      if (auto it = casts.find(key); it != casts.end())
        return it->second;
      OpBuilder::InsertionGuard guard(b);
      auto type = cast<RankedTensorType>(value.getType()).clone(element);
      Value converted;
      if (auto transpose = value.getDefiningOp<nn::TransposeOp>()) {
        // A cast commutes with a transpose: cast what it reads and
        // transpose that. The transpose then feeds its reader directly (a
        // weight's into a matmul, which reads it as stored:
        // ztc-fold-transposes) and copies half the bytes when it stays.
        Value input = castTo(transpose.getX(), element);
        b.setInsertionPointAfter(transpose);
        if (Operation *def = input.getDefiningOp();
            def && transpose->isBeforeInBlock(def))
          b.setInsertionPointAfter(def);
        converted = Arithmetic{b, transpose.getLoc()}.relayout(
            {transpose.getOperation()}, input);
      } else {
        if (Operation *def = value.getDefiningOp())
          b.setInsertionPointAfter(def);
        else
          b.setInsertionPointToStart(&block);
        converted = nn::CastOp::create(b, value.getLoc(), type, value);
      }
      if (data.contains(value))
        data.insert(converted);
      casts[key] = converted;
      return converted;
    };

    // --half-weights: the parameters whose every read goes through their
    // half working copy (a widened one for an f32 reader).
    DenseSet<Value> halfParams;
    if (halfWeights)
      for (BlockArgument arg : func.getArguments())
        if (train::hasRole(func, arg.getArgNumber(),
                           train::BindingRole::Param) &&
            isFloatTensor(arg.getType()) &&
            widthOf(elementOf(arg)) > widthOf(half))
          halfParams.insert(arg);
    auto read = [&](Value value, Type element) -> Value {
      if (!halfParams.contains(value))
        return castTo(value, element);
      return castTo(castTo(value, half), element);
    };

    for (Operation &op :
         llvm::make_early_inc_range(block.without_terminator())) {
      if (!isa<nn::NNDialect>(op.getDialect()))
        continue;
      // Every nn op declares its class (NN_Op requires one).
      ComputeClass compute = *nn::getComputeClass(&op);
      if (compute == ComputeClass::Own)
        continue;
      bool dependsOnData = llvm::any_of(
          op.getOperands(), [&](Value v) { return data.contains(v); });
      SmallVector<unsigned> floats;
      for (auto [i, operand] : llvm::enumerate(op.getOperands()))
        if (isFloatTensor(operand.getType()))
          floats.push_back(i);
      if (floats.empty()) {
        if (dependsOnData)
          data.insert(op.result_begin(), op.result_end());
        continue;
      }
      // The compute type.
      if (keep && compute == ComputeClass::Half && matchesKeep(op, *keep))
        compute = ComputeClass::Wide;
      Type target;
      if (compute == ComputeClass::Half) {
        target = half;
      } else if (compute == ComputeClass::Wide) {
        // As the model has it: the widest float operand before autocast
        // narrowed any (a half operand here came from a half op).
        for (unsigned i : floats) {
          Type element = elementOf(op.getOperand(i));
          if (element == half)
            element = Float32Type::get(context);
          if (!target || widthOf(element) > widthOf(target))
            target = element;
        }
      } else {
        // Activations decide; an op of weights and constants alone keeps
        // the widest of them (f32 unless a half op fed it).
        for (bool activationsOnly : {true, false}) {
          for (unsigned i : floats) {
            Value operand = op.getOperand(i);
            if (activationsOnly && !data.contains(operand))
              continue;
            Type element = elementOf(operand);
            if (!target || widthOf(element) > widthOf(target))
              target = element;
          }
          if (target)
            break;
        }
      }
      if (dependsOnData)
        data.insert(op.result_begin(), op.result_end());
      for (unsigned i : floats)
        op.setOperand(i, read(op.getOperand(i), target));
      // Re-typed when its operands' types changed: here, or because an
      // earlier op was re-typed.
      if (failed(retype(b, op, data)))
        return signalPassFailure();
    }

    // What the walk left reading a half-weight parameter as it is (an op
    // outside nn, the model's outputs) reads its copy widened back.
    for (Value param : halfParams) {
      Value copy = castTo(param, half);
      for (OpOperand &use : llvm::make_early_inc_range(param.getUses()))
        if (use.getOwner() != copy.getDefiningOp())
          use.set(read(param, elementOf(param)));
    }

    func->setAttr(train::kPrecisionAttr,
                  b.getStringAttr(spell(kHalfTypes, precision.getValue())));
    // The model's outputs keep their types (the loss is computed in f32).
    Operation *ret = block.getTerminator();
    for (auto [i, result] : llvm::enumerate(func.getResultTypes())) {
      Value value = ret->getOperand(i);
      if (value.getType() != result && isFloatTensor(result)) {
        b.setInsertionPoint(ret);
        ret->setOperand(i,
                        nn::CastOp::create(b, value.getLoc(), result, value));
      }
    }
  }

  /// Whether `op`'s name (nn.matmul) or one of its ONNX node names matches
  /// --keep-fp32.
  static bool matchesKeep(Operation &op, llvm::Regex &keep) {
    if (keep.match(op.getName().getStringRef()))
      return true;
    SmallVector<std::string> names;
    train::collectNodeNames(op.getLoc(), names);
    return llvm::any_of(
        names, [&](const std::string &name) { return keep.match(name); });
  }

  /// Re-infers `op`'s result types from its (cast) operands, and re-creates
  /// it when they changed.
  static LogicalResult retype(OpBuilder &b, Operation &op,
                              DenseSet<Value> &data) {
    SmallVector<Type> types;
    if (auto infer = dyn_cast<InferTypeOpInterface>(&op)) {
      if (failed(infer.inferReturnTypes(
              op.getContext(), op.getLoc(), op.getOperands(),
              op.getAttrDictionary(), op.getPropertiesStorage(),
              op.getRegions(), types)))
        return op.emitOpError("ztc-autocast: has no valid result type on its "
                              "cast operands");
    } else if (isa<nn::ReshapeOp>(op)) {
      types.push_back(cast<RankedTensorType>(op.getResult(0).getType())
                          .clone(elementOf(op.getOperand(0))));
    } else {
      return op.emitOpError("ztc-autocast cannot re-type this op");
    }
    if (TypeRange(types) == op.getResultTypes())
      return success();
    b.setInsertionPoint(&op);
    OperationState state(op.getLoc(), op.getName(), op.getOperands(), types,
                         op.getAttrs());
    Operation *retyped = b.create(state);
    if (data.contains(op.getResult(0)))
      data.insert(retyped->result_begin(), retyped->result_end());
    op.replaceAllUsesWith(retyped->getResults());
    op.erase();
    return success();
  }
};

} // namespace
