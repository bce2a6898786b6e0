//===- Lora.cpp - the ztc-lora pass ---------------------------------------===//
//
// Low-rank adapters (LoRA) on the matrix products whose weights a pattern
// names, and the rest of the model frozen: Hugging Face peft's LoraConfig
// as a graph rewrite. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Arithmetic.h"
#include "passes/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include <cmath>

namespace mlir::ztc {
#define GEN_PASS_DEF_LORAPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// A param's module: its name without a last ".weight".
StringRef moduleOf(StringRef name) {
  name.consume_back(".weight");
  return name;
}

/// A module-name pattern as peft users write them: the regex matches the
/// whole name or a tail after a '.'; with a leading '^', the whole name
/// only.
class ModulePattern {
public:
  static FailureOr<ModulePattern> compile(func::FuncOp func, StringRef flag,
                                          StringRef pattern) {
    ModulePattern compiled;
    compiled.wholeOnly = pattern.consume_front("^");
    compiled.regex = llvm::Regex(("^(" + pattern + ")$").str());
    std::string error;
    if (!compiled.regex.isValid(error))
      return func.emitError("invalid regular expression '")
             << pattern << "' in --lora " << flag << ": " << error;
    return compiled;
  }

  bool matches(StringRef module) const {
    if (regex.match(module))
      return true;
    if (wholeOnly)
      return false;
    for (size_t dot = module.find('.'); dot != StringRef::npos;
         dot = module.find('.', dot + 1))
      if (regex.match(module.drop_front(dot + 1)))
        return true;
    return false;
  }

private:
  llvm::Regex regex;
  bool wholeOnly = false;
};

/// FNV-1a (64-bit) of `text`, mixed with `seed`: an adapter's random stream,
/// stable from build to build and different for each name.
int64_t streamOf(StringRef text, int64_t seed) {
  uint64_t hash = 0xCBF29CE484222325ull ^ uint64_t(seed);
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001B3ull;
  }
  return int64_t(hash);
}

/// A matrix product reading a target weight: `y = x W` or `y = x W^T`.
struct Product {
  nn::MatMulOp matmul;
  bool transposed; // W is [out, in] (a Linear)
};

struct LoraPass : public ztc::impl::LoraPassBase<LoraPass> {
  using LoraPassBase::LoraPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isDeclaration())
      return;
    if (failed(checkOptions(func)) || failed(run(func)))
      signalPassFailure();
  }

  LogicalResult checkOptions(func::FuncOp func) {
    if (rank < 1)
      return func.emitError("--lora r must be at least 1, got ")
             << int64_t(rank);
    if (!(alpha > 0.0) || !std::isfinite(alpha))
      return func.emitError("--lora alpha must be a positive number, got ")
             << double(alpha);
    if (!(dropout >= 0.0 && dropout < 1.0))
      return func.emitError("--lora dropout must be in [0, 1), got ")
             << double(dropout);
    if (targets.empty())
      return func.emitError(
          "--lora needs targets=REGEX: the modules to adapt (for example "
          "q_proj|v_proj, or c_attn for GPT-2)");
    return success();
  }

  /// The matrix products that read `weight` as their right operand,
  /// directly or through a [1, 0] transpose.
  static SmallVector<Product> productsOf(BlockArgument weight) {
    SmallVector<Product> products;
    for (OpOperand &use : weight.getUses()) {
      Operation *user = use.getOwner();
      if (auto matmul = dyn_cast<nn::MatMulOp>(user)) {
        if (use.getOperandNumber() == 1)
          products.push_back({matmul, false});
        continue;
      }
      auto transpose = dyn_cast<nn::TransposeOp>(user);
      if (!transpose || transpose.getPerm() != ArrayRef<int64_t>{1, 0})
        continue;
      for (OpOperand &read : transpose->getUses())
        if (auto matmul = dyn_cast<nn::MatMulOp>(read.getOwner()))
          if (read.getOperandNumber() == 1)
            products.push_back({matmul, true});
    }
    return products;
  }

  /// The products reading `weight`, when they are all its reads (none
  /// otherwise).
  static SmallVector<Product> onlyProducts(BlockArgument weight) {
    SmallVector<Product> products = productsOf(weight);
    size_t reads = 0;
    for (Operation *user : weight.getUsers())
      reads += isa<nn::TransposeOp>(user)
                   ? size_t(std::distance(user->use_begin(), user->use_end()))
                   : 1;
    if (products.size() != reads)
      products.clear();
    return products;
  }

  /// Whether `value` reaches the function's results through reshapes,
  /// transposes and additions alone: the output layer's product.
  static bool reachesResults(Value value) {
    for (Operation *user : value.getUsers()) {
      if (isa<func::ReturnOp>(user))
        return true;
      if (isa<nn::ReshapeOp, nn::TransposeOp, nn::AddOp>(user) &&
          reachesResults(user->getResult(0)))
        return true;
    }
    return false;
  }

  /// Training-mode dropout of `x` with probability `dropout` in `stream`,
  /// the identity in the evaluate entry (as Dropout converts).
  FailureOr<Value> dropoutOf(OpBuilder &b, Location loc, func::FuncOp func,
                             Value x, int64_t stream) {
    auto keyType = RankedTensorType::get({}, b.getI64Type());
    BlockArgument key = train::findBinding(func, "rng");
    if (key &&
        (key.getType() != keyType ||
         !train::hasRole(func, key.getArgNumber(), train::BindingRole::Hyper)))
      return emitError(loc, "--lora dropout needs the random key 'rng', but "
                            "the graph has an input of that name (")
             << key.getType() << ")";
    Value rng = key ? Value(key)
                    : train::appendBoundArgument(func, keyType, "rng",
                                                 train::BindingRole::Hyper);
    auto type = cast<RankedTensorType>(x.getType());
    Arithmetic a{b, loc};
    Value u = nn::RandomUniformOp::create(b, loc, type.clone(b.getF32Type()),
                                          rng, stream);
    Value keep = a.logicalNot(a.less(u, a.scalar(dropout)));
    Value scaled = a.mul(x, 1.0 / (1.0 - dropout));
    Value y = a.select(keep, scaled, a.scalar(0.0, type.getElementType()));
    return Value(nn::ModeSelectOp::create(b, loc, y.getType(), y, x));
  }

  LogicalResult run(func::FuncOp func) {
    FailureOr<ModulePattern> targetPattern =
        ModulePattern::compile(func, "targets", targets);
    if (failed(targetPattern))
      return failure();
    std::optional<ModulePattern> savePattern;
    if (!modulesToSave.empty()) {
      FailureOr<ModulePattern> compiled =
          ModulePattern::compile(func, "modules-to-save", modulesToSave);
      if (failed(compiled))
        return failure();
      savePattern.emplace(std::move(*compiled));
    }
    double scale = rslora ? alpha / std::sqrt(double(rank)) : alpha / rank;
    MLIRContext *ctx = func.getContext();
    OpBuilder b(ctx);

    // 1-2. The targets, and the products that read each.
    struct Target {
      BlockArgument weight;
      StringRef name;
      SmallVector<Product> products;
    };
    SmallVector<Target> found;
    SmallVector<BlockArgument> params;
    for (BlockArgument arg : func.getArguments()) {
      unsigned index = arg.getArgNumber();
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!train::hasRole(func, index, train::BindingRole::Param) || !type ||
          !isa<FloatType>(type.getElementType()))
        continue;
      params.push_back(arg);
      StringRef name = train::bindingName(func, index);
      if (!targetPattern->matches(moduleOf(name)))
        continue;
      SmallVector<Product> products = productsOf(arg);
      if (products.empty() || type.getRank() != 2)
        return func.emitError("--lora targets '")
               << targets << "' match '" << name << "' (" << type
               << "), which is not the weight of a matrix product (a "
                  "Linear's [out, in] or a Conv1D's [in, out]); narrow "
                  "targets to the projections";
      found.push_back({arg, name, std::move(products)});
    }
    if (found.empty())
      return func.emitError("--lora targets '")
             << targets << "' match no parameter's module (names such as '"
             << (params.empty() ? StringRef("<none>")
                                : moduleOf(train::bindingName(
                                      func, params.front().getArgNumber())))
             << "')";

    // 3. The adapters.
    SmallVector<Attribute> adapters;
    llvm::StringSet<> adapted;
    for (Target &target : found) {
      auto type = cast<RankedTensorType>(target.weight.getType());
      Type elem = type.getElementType();
      bool transposed = target.products.front().transposed;
      if (llvm::any_of(target.products, [&](const Product &product) {
            return product.transposed != transposed;
          }))
        return func.emitError("--lora: '")
               << target.name << "' is read both as [in, out] and as [out, in]";
      int64_t in = type.getDimSize(transposed ? 1 : 0);
      int64_t out = type.getDimSize(transposed ? 0 : 1);
      std::string module = moduleOf(target.name).str();
      std::string nameA = module + ".lora_A.weight";
      std::string nameB = module + ".lora_B.weight";
      for (const std::string &name : {nameA, nameB})
        if (train::findBinding(func, name))
          return func.emitError("--lora: the model already has a tensor "
                                "named '")
                 << name << "'; is it already adapted?";
      auto initial = [&](double bound, StringRef name) {
        return DictionaryAttr::get(
            ctx, {b.getNamedAttr("bound", b.getF64FloatAttr(bound)),
                  b.getNamedAttr("seed",
                                 b.getI64IntegerAttr(streamOf(name, seed)))});
      };
      Value A = train::appendBoundArgument(
          func, RankedTensorType::get({rank, in}, elem), nameA,
          train::BindingRole::Param);
      func.setArgAttr(func.getNumArguments() - 1, train::kInitialUniformAttr,
                      initial(1.0 / std::sqrt(double(in)), nameA));
      Value B = train::appendBoundArgument(
          func, RankedTensorType::get({out, rank}, elem), nameB,
          train::BindingRole::Param);
      func.setArgAttr(func.getNumArguments() - 1, train::kInitialUniformAttr,
                      initial(0.0, nameB));
      adapted.insert(module);
      adapters.push_back(
          b.getArrayAttr({b.getStringAttr(target.name), b.getStringAttr(nameA),
                          b.getStringAttr(nameB),
                          b.getStringAttr(transposed ? "out_in" : "in_out")}));

      for (const Product &product : target.products) {
        nn::MatMulOp matmul = product.matmul;
        Location loc = matmul.getLoc();
        b.setInsertionPointAfter(matmul);
        Arithmetic a{b, loc};
        Value x = matmul.getA();
        if (dropout > 0.0) {
          FailureOr<Value> dropped = dropoutOf(
              b, loc, func, x, streamOf(module + ".lora_dropout", seed));
          if (failed(dropped))
            return failure();
          x = *dropped;
        }
        auto perm = b.getDenseI64ArrayAttr({1, 0});
        Value At = nn::TransposeOp::create(b, loc, A, perm);
        Value Bt = nn::TransposeOp::create(b, loc, B, perm);
        Value down = nn::MatMulOp::create(b, loc, x, At);
        Value up = nn::MatMulOp::create(b, loc, down, Bt);
        Value sum = a.add(matmul.getResult(), a.mul(up, scale));
        matmul.getResult().replaceAllUsesExcept(sum, sum.getDefiningOp());
      }
    }

    // 4. Everything else is frozen, but the biases `bias` names and the
    // modules to save.
    for (BlockArgument arg : params) {
      StringRef name = train::bindingName(func, arg.getArgNumber());
      if (name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight"))
        continue;
      StringRef module = name.rsplit('.').first;
      bool trains = (bias == LoraBias::All && name.contains("bias")) ||
                    (bias == LoraBias::LoraOnly && name.ends_with(".bias") &&
                     adapted.contains(module)) ||
                    (savePattern && savePattern->matches(module));
      if (!trains)
        func.setArgAttr(arg.getArgNumber(), train::kFrozenAttr,
                        UnitAttr::get(ctx));
    }

    // 5. What was added, for the manifest and the adapter export.
    func->setAttr(
        train::kLoraAttr,
        DictionaryAttr::get(
            ctx, {b.getNamedAttr("r", b.getI64IntegerAttr(rank)),
                  b.getNamedAttr("alpha", b.getF64FloatAttr(alpha)),
                  b.getNamedAttr("scale", b.getF64FloatAttr(scale)),
                  b.getNamedAttr("dropout", b.getF64FloatAttr(dropout)),
                  b.getNamedAttr("rslora", b.getBoolAttr(rslora)),
                  b.getNamedAttr("bias", b.getStringAttr(spell(
                                             kLoraBiases, bias.getValue()))),
                  b.getNamedAttr("adapters", b.getArrayAttr(adapters))}));

    // 6. QLoRA: the frozen weights of the products, but the output
    // layer's, are held in NF4 once the gradients are built.
    if (baseDtype == BaseType::Nf4) {
      for (BlockArgument arg : params) {
        auto type = cast<RankedTensorType>(arg.getType());
        if (!func.getArgAttr(arg.getArgNumber(), train::kFrozenAttr) ||
            type.getRank() != 2)
          continue;
        SmallVector<Product> products = onlyProducts(arg);
        if (products.empty() || llvm::any_of(products, [](Product product) {
              return reachesResults(product.matmul.getResult());
            }))
          continue;
        func.setArgAttr(arg.getArgNumber(), train::kNf4Attr,
                        b.getDenseI64ArrayAttr(type.getShape()));
      }
    }
    return success();
  }
};

} // namespace
