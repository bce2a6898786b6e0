//===- MatmulEpilogues.cpp - the ztc-matmul-epilogues pass ----------------===//
//
// Lets a matrix product add its bias, and a residual, as it stores its
// result, instead of a loop reading and writing the whole product again;
// a layer norm's input gradient add the residual's gradient, and a layer
// norm store its result in the narrower type a cast after it gave (and its
// backward read and store the products' narrower gradients).
// See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/ElementTypes.h"
#include "passes/Kernel/Folding.h"
#include "passes/Kernel/LiveRanges.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_MATMULEPILOGUESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;
using mlir::ztc::topLevelIn;
using mlir::ztc::kernel::addLoc;
using mlir::ztc::kernel::writtenBetween;

namespace {

/// What a loop adds to a product: the inputs holding the product, the bias
/// and (optionally) the addend.
struct Epilogue {
  Value product, bias, addend;
};

/// The input of `loop` that block argument `value` stands for, or null when
/// `value` is no argument of its body.
Value inputOf(kernel::ElementwiseOp loop, Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner() != &loop.getBody().front())
    return Value();
  return loop.getInputs()[arg.getArgNumber()];
}

/// The float addition that defines `value`, if it is rounded (a gradient
/// formula's unrounded intermediates are left alone).
arith::AddFOp roundedAdd(Value value) {
  auto add = value.getDefiningOp<arith::AddFOp>();
  if (!add || add->hasAttr(kernel::kUnroundedAttr))
    return nullptr;
  return add;
}

/// Whether `bias` is a vector the product's last dimension adds: its
/// element type, that dimension's size last and ones before.
bool isRowBias(Value bias, MemRefType product) {
  auto type = cast<MemRefType>(bias.getType());
  if (type.getElementType() != product.getElementType() || type.getRank() < 1 ||
      type.getRank() > product.getRank() ||
      type.getShape().back() != product.getShape().back())
    return false;
  return llvm::all_of(type.getShape().drop_back(),
                      [](int64_t size) { return size == 1; });
}

/// The product and the bias `add` sums (either way round): inputs of
/// `loop`, the product the one `productInput` finds for its operand (the
/// input that block value stands for, when of the right type), the bias a
/// row vector of the product's type.
std::optional<std::pair<Value, Value>>
productAndBias(kernel::ElementwiseOp loop, arith::AddFOp add,
               llvm::function_ref<Value(Value)> productInput) {
  for (auto [p, b] : {std::pair(add.getLhs(), add.getRhs()),
                      std::pair(add.getRhs(), add.getLhs())}) {
    Value product = productInput(p), bias = inputOf(loop, b);
    if (product && bias && product != bias &&
        isRowBias(bias, cast<MemRefType>(product.getType())))
      return std::pair(product, bias);
  }
  return std::nullopt;
}

/// The epilogue `loop` computes when its one output is `(p + bias)` or
/// `(p + bias) + addend` (each sum either way round), p and the addend of
/// the output's type and the bias a row vector.
std::optional<Epilogue> matchEpilogue(kernel::ElementwiseOp loop) {
  if (loop.getOutputs().size() != 1)
    return std::nullopt;
  auto type = cast<MemRefType>(loop.getOutput().getType());
  if (!isa<FloatType>(type.getElementType()))
    return std::nullopt;
  Block &body = loop.getBody().front();
  arith::AddFOp outer = roundedAdd(loop.getYielded().front());
  if (!outer)
    return std::nullopt;
  // (p + bias): the product of the output's type, the bias a row vector.
  auto sum = [&](arith::AddFOp add) -> std::optional<Epilogue> {
    auto found = productAndBias(loop, add, [&](Value p) {
      Value input = inputOf(loop, p);
      return input && input.getType() == type ? input : Value();
    });
    if (!found)
      return std::nullopt;
    return Epilogue{found->first, found->second, Value()};
  };
  // Only the sums and the yield.
  if (body.getOperations().size() == 2)
    return sum(outer);
  if (body.getOperations().size() != 3)
    return std::nullopt;
  for (auto [inner, a] : {std::pair(outer.getLhs(), outer.getRhs()),
                          std::pair(outer.getRhs(), outer.getLhs())}) {
    arith::AddFOp add = roundedAdd(inner);
    Value addend = inputOf(loop, a);
    if (!add || !add->hasOneUse() || !addend || addend.getType() != type)
      continue;
    if (std::optional<Epilogue> found = sum(add)) {
      if (found->product == addend)
        return std::nullopt;
      found->addend = addend;
      return found;
    }
  }
  return std::nullopt;
}

/// The one op other than `reader` (or `via`, a view `reader` reads it
/// through) that uses `buffer`, an alloc of its own, when it is a
/// `WriterOp` that `writes` accepts (it writes the buffer), before
/// `reader` in its block and on its stream.
template <typename WriterOp>
WriterOp soleWriter(Operation *reader, Value buffer,
                    llvm::function_ref<bool(WriterOp)> writes,
                    Operation *via = nullptr) {
  if (!buffer.getDefiningOp<kernel::AllocOp>())
    return nullptr;
  WriterOp writer;
  for (Operation *user : buffer.getUsers()) {
    if (user == reader || user == via)
      continue;
    auto op = dyn_cast<WriterOp>(user);
    if (writer || !op || !writes(op))
      return nullptr;
    writer = op;
  }
  if (!writer || writer->getBlock() != reader->getBlock() ||
      !writer->isBeforeInBlock(reader) ||
      kernel::streamOf(writer) != kernel::streamOf(reader))
    return nullptr;
  return writer;
}

/// The buffer the loop input `value` reads: `value` itself, or with
/// `throughView`, the source of a view (a reshape, GPT-2's [B*T, C]
/// products read as [B, T, C]) that nothing but one operand of the loop
/// reads.
Value storedBuffer(Value value, bool throughView) {
  auto view = value.getDefiningOp<kernel::ViewOp>();
  if (!throughView || !view || !value.hasOneUse())
    return value;
  return view.getSource();
}

/// The call of kernel `id` (with `inputs` inputs, where given) that writes
/// `buffer` (or, with `throughView`, the buffer storedBuffer says it
/// reads) as its first output, when that is an alloc of its own that only
/// that call and `loop` use, and the call can move to the loop: it comes
/// before the loop in its block, on its stream, nothing between them
/// writes what it reads, and the loop's output is no buffer it reads.
kernel::CallOp soleWriterBefore(kernel::ElementwiseOp loop, Value buffer,
                                kernel::LibraryKernelId id,
                                std::optional<size_t> inputs,
                                bool throughView = false) {
  Value stored = storedBuffer(buffer, throughView);
  kernel::CallOp writer = soleWriter<kernel::CallOp>(
      loop, stored,
      [&](kernel::CallOp call) {
        return kernel::isCallOf(call, id) &&
               (!inputs || call.getInputs().size() == *inputs) &&
               call.getOutputs().front() == stored;
      },
      stored == buffer ? nullptr : buffer.getDefiningOp());
  if (!writer)
    return nullptr;
  Value output = kernel::rootBuffer(loop.getOutput());
  for (Value input : writer.getInputs()) {
    Value root = kernel::rootBuffer(input);
    if (root == output || writtenBetween(writer, loop, root))
      return nullptr;
  }
  return writer;
}

/// `value` with `like`'s shape and its own element type: itself, or a view
/// of it at `b` (a loop's operand as the call it folds into shapes it:
/// GPT-2's [B, T, C] residual as its [B*T, C] product).
Value shapedLike(OpBuilder &b, Value value, Type like) {
  auto type = cast<MemRefType>(value.getType());
  ArrayRef<int64_t> shape = cast<MemRefType>(like).getShape();
  if (type.getShape() == shape)
    return value;
  return kernel::ViewOp::create(
      b, value.getLoc(), MemRefType::get(shape, type.getElementType()), value);
}

/// Erases the alloc `buffer`, or the view `buffer` and the alloc it views
/// once nothing else uses it: a folded call's result, read by nothing now.
void eraseBuffer(Value buffer) {
  Operation *made = buffer.getDefiningOp();
  Value stored = isa<kernel::ViewOp>(made) ? made->getOperand(0) : Value();
  made->erase();
  if (stored && stored.use_empty())
    stored.getDefiningOp()->erase();
}

/// Replaces `loop` and `call`, which wrote `buffer` for the loop alone
/// (directly, or through a view only the loop reads), by one call of
/// `callee` at the loop (soleWriterBefore said it may move there), keeping
/// both locations. The loop's output is viewed with the call's first
/// output's shape where they differ.
void fuseAtLoop(kernel::ElementwiseOp loop, kernel::CallOp call, Value buffer,
                StringRef callee, ValueRange inputs, ValueRange outputs) {
  OpBuilder b(loop);
  SmallVector<Value> results(outputs);
  results.front() =
      shapedLike(b, results.front(), call.getOutputs().front().getType());
  auto fused = kernel::CallOp::create(b, call.getLoc(), callee, inputs, results,
                                      call.getConfig());
  addLoc(fused, loop.getLoc());
  loop.erase();
  call.erase();
  eraseBuffer(buffer);
}

/// How producerOf finds a product: in the buffer its call writes, by a
/// call without a bias; or also through a view of that buffer; or also
/// through a view, by a call that adds a bias already.
enum class Reads { Direct, View, ViewOfBiased };

/// The product `loop` adds to, when a `matmul` call writes it into a buffer
/// of its own that only the loop reads (as `reads` allows), and the call
/// can move to the loop (soleWriterBefore).
kernel::CallOp producerOf(kernel::ElementwiseOp loop, Value product,
                          Reads reads = Reads::Direct) {
  kernel::CallOp matmul = soleWriterBefore(
      loop, product, kernel::LibraryKernelId::matmul,
      reads == Reads::ViewOfBiased ? std::nullopt : std::optional<size_t>(2),
      reads != Reads::Direct);
  if (!matmul)
    return nullptr;
  Value output = kernel::rootBuffer(loop.getOutput());
  // The product's buffer goes once the call writes the loop's output.
  if (output == kernel::rootBuffer(product))
    return nullptr;
  for (Value input : loop.getInputs())
    if (input != product && kernel::rootBuffer(input) == output)
      return nullptr; // the library reads the addend after the product
  return matmul;
}

/// Whether a bias `loop` adds along its last dimension adds along the last
/// dimension of `matmul`'s product, which the loop may read through a view.
bool addsAlongLast(kernel::CallOp matmul, kernel::ElementwiseOp loop) {
  return cast<MemRefType>(matmul.getOutputs().front().getType())
             .getShape()
             .back() ==
         cast<MemRefType>(loop.getOutput().getType()).getShape().back();
}

/// The inputs of a call of `matmul`'s product adding `addend` (viewed with
/// the product's shape at `b`): a, b, the addend, then the bias the call
/// adds, if any.
SmallVector<Value> withAddend(OpBuilder &b, kernel::CallOp matmul,
                              Value addend) {
  SmallVector<Value> inputs(matmul.getInputs().take_front(2));
  inputs.push_back(
      shapedLike(b, addend, matmul.getOutputs().front().getType()));
  if (matmul.getInputs().size() > 2)
    inputs.push_back(matmul.getInputs()[2]);
  return inputs;
}

/// Whether `sum`, a `reduce_sum` call, adds its input's rows: every
/// dimension but the last reduced, into that dimension's size (a bias
/// gradient).
bool sumsRows(kernel::CallOp sum) {
  auto input = cast<MemRefType>(sum.getInputs().front().getType());
  auto output = cast<MemRefType>(sum.getOutputs().front().getType());
  auto axes = sum.getConfig().getAs<DenseI64ArrayAttr>("axes");
  if (!axes || input.getRank() < 2 ||
      output.getNumElements() != input.getShape().back() ||
      static_cast<int64_t>(axes.size()) != input.getRank() - 1)
    return false;
  for (auto [position, axis] : llvm::enumerate(axes.asArrayRef()))
    if (axis != static_cast<int64_t>(position))
      return false;
  return true;
}

/// Whether an op after `from` and before `to` (in their block, or nested in
/// an op there) reads or writes `root`.
bool usedBetween(Operation *from, Operation *to, Value root) {
  SmallVector<Operation *> users;
  kernel::bufferUsers(root, users);
  return llvm::any_of(users, [&](Operation *user) {
    Operation *top = topLevelIn(user, *from->getBlock());
    return from->isBeforeInBlock(top) && top->isBeforeInBlock(to);
  });
}

/// The weight gradient's product that reads the rows `sum` adds: a
/// `matmul` without a bias whose first operand, [rows, n] and transposed
/// (gᵀ x, a layer computing x Wᵀ), or else its second, [rows, n] and not
/// transposed (`ofB`: xᵀ g, a layer computing x W, GPT-2's Conv1D), is a
/// view of the sum's input (or that input), in the sum's block and on its
/// stream. Either call may come first; the later one can take on the
/// earlier's work when nothing between them writes what the earlier reads,
/// nor reads or writes the earlier's output, and the later one does not
/// read that output.
struct WeightGradient {
  kernel::CallOp matmul;
  bool ofB = false;
};
std::optional<WeightGradient> weightGradientOf(kernel::CallOp sum) {
  Value rows = kernel::rootBuffer(sum.getInputs().front());
  int64_t n =
      cast<MemRefType>(sum.getInputs().front().getType()).getShape().back();
  SmallVector<Operation *> users;
  kernel::bufferUsers(rows, users);
  for (Operation *user : users) {
    auto matmul = dyn_cast<kernel::CallOp>(user);
    if (!matmul || matmul->getBlock() != sum->getBlock() ||
        !kernel::isCallOf(matmul, kernel::LibraryKernelId::matmul) ||
        matmul.getInputs().size() != 2 ||
        kernel::streamOf(matmul) != kernel::streamOf(sum))
      continue;
    // The operand `index` as the summed rows: [rows, n], stored so.
    auto sums = [&](unsigned index, bool transposed) {
      Value operand = matmul.getInputs()[index];
      auto type = cast<MemRefType>(operand.getType());
      return kernel::rootBuffer(operand) == rows &&
             static_cast<bool>(matmul.getConfig().get(
                 index ? "transpose_b" : "transpose_a")) == transposed &&
             type.getRank() == 2 && type.getShape().back() == n;
    };
    bool ofA = sums(0, true), ofB = !ofA && sums(1, false);
    if (!ofA && !ofB)
      continue;
    kernel::CallOp first = sum->isBeforeInBlock(matmul) ? sum : matmul;
    kernel::CallOp second = first == sum ? matmul : sum;
    Value output = kernel::rootBuffer(first.getOutputs().front());
    bool movable = !usedBetween(first, second, output);
    for (Value input : first.getInputs())
      movable &= !writtenBetween(first, second, kernel::rootBuffer(input));
    for (Value input : second.getInputs())
      movable &= kernel::rootBuffer(input) != output;
    if (movable)
      return WeightGradient{matmul, ofB};
  }
  return std::nullopt;
}

/// Folds each bias gradient into the weight gradient's product:
/// `matmul_bias_grad` (or `matmul_bias_grad_b`, the rows its second
/// operand) writes both, at the later of the two calls.
void foldBiasGradients(func::FuncOp function) {
  SmallVector<kernel::CallOp> sums;
  function.walk([&](kernel::CallOp call) {
    // In the step's own block, where every use of a buffer is.
    if (kernel::isCallOf(call, kernel::LibraryKernelId::reduce_sum) &&
        call->getParentOp() == function && sumsRows(call))
      sums.push_back(call);
  });
  for (kernel::CallOp sum : sums) {
    std::optional<WeightGradient> gradient = weightGradientOf(sum);
    if (!gradient)
      continue;
    kernel::CallOp matmul = gradient->matmul;
    OpBuilder b(sum->isBeforeInBlock(matmul) ? matmul : sum);
    auto fused = kernel::CallOp::create(
        b, matmul.getLoc(),
        gradient->ofB ? "matmul_bias_grad_b" : "matmul_bias_grad",
        matmul.getInputs(),
        ValueRange{matmul.getOutputs().front(), sum.getOutputs().front()},
        matmul.getConfig());
    addLoc(fused, sum.getLoc());
    // The sum's scratch (CUDA's partial sums) is planned again for the
    // new call by ztc-plan-scratch, which runs later.
    matmul.erase();
    sum.erase();
  }
}

/// The two inputs `loop` adds when its one output is their float sum, both
/// of the output's type (the sum may be marked unrounded: it is stored,
/// so rounded, at once).
std::optional<std::pair<Value, Value>> matchSum(kernel::ElementwiseOp loop) {
  if (loop.getOutputs().size() != 1 ||
      loop.getBody().front().getOperations().size() != 2)
    return std::nullopt;
  auto type = cast<MemRefType>(loop.getOutput().getType());
  auto add = loop.getYielded().front().getDefiningOp<arith::AddFOp>();
  if (!add)
    return std::nullopt;
  Value lhs = inputOf(loop, add.getLhs()), rhs = inputOf(loop, add.getRhs());
  if (!lhs || !rhs || lhs == rhs || lhs.getType() != type ||
      rhs.getType() != type)
    return std::nullopt;
  return std::pair(lhs, rhs);
}

/// The `layer_norm_backward` call without an addend that writes `gradient`
/// (its first output) into a buffer of its own that only it and `loop`
/// use, when the call can move to the loop and add `addend` there: nothing
/// between them writes what it reads nor uses its other outputs, and the
/// loop's output is neither something it reads nor a different view of
/// the addend's buffer.
kernel::CallOp residualProducerOf(kernel::ElementwiseOp loop, Value gradient,
                                  Value addend) {
  kernel::CallOp norm = soleWriterBefore(
      loop, gradient, kernel::LibraryKernelId::layer_norm_backward, 3);
  if (!norm)
    return nullptr;
  if (kernel::rootBuffer(addend) == kernel::rootBuffer(loop.getOutput()) &&
      addend != loop.getOutput())
    return nullptr;
  for (Value other : norm.getOutputs().drop_front())
    if (usedBetween(norm, loop, kernel::rootBuffer(other)))
      return nullptr;
  return norm;
}

/// The loops in the step's block (not nested in another op), in program
/// order: what the sum folds below look at.
SmallVector<kernel::ElementwiseOp> stepLoops(func::FuncOp function) {
  SmallVector<kernel::ElementwiseOp> loops;
  function.walk([&](kernel::ElementwiseOp loop) {
    if (loop->getParentOp() == function)
      loops.push_back(loop);
  });
  return loops;
}

/// Folds each residual's gradient into the layer norm's input gradient it
/// is added to: `layer_norm_backward` with the addend, at the loop.
void foldResidualGradients(func::FuncOp function) {
  for (kernel::ElementwiseOp loop : stepLoops(function)) {
    std::optional<std::pair<Value, Value>> sum = matchSum(loop);
    if (!sum)
      continue;
    for (auto [gradient, addend] : {*sum, std::pair(sum->second, sum->first)}) {
      kernel::CallOp norm = residualProducerOf(loop, gradient, addend);
      if (!norm)
        continue;
      SmallVector<Value> inputs(norm.getInputs());
      inputs.push_back(addend);
      SmallVector<Value> outputs(norm.getOutputs());
      outputs.front() = loop.getOutput();
      fuseAtLoop(loop, norm, gradient, "layer_norm_backward", inputs, outputs);
      break;
    }
  }
}

/// The three inputs `loop` adds when its one output is `(x + y) + z` (each
/// sum either way round), all of the output's type and distinct, and the
/// inner sum is rounded to the element type (or that type is its own
/// compute type, f32), so that storing x + y first rounds nothing the loop
/// kept.
struct ThreeSum {
  Value x, y, z;
};
std::optional<ThreeSum> matchThreeSum(kernel::ElementwiseOp loop) {
  if (loop.getOutputs().size() != 1 ||
      loop.getBody().front().getOperations().size() != 3)
    return std::nullopt;
  auto type = cast<MemRefType>(loop.getOutput().getType());
  auto outer = loop.getYielded().front().getDefiningOp<arith::AddFOp>();
  if (!outer)
    return std::nullopt;
  for (auto [inner, last] : {std::pair(outer.getLhs(), outer.getRhs()),
                             std::pair(outer.getRhs(), outer.getLhs())}) {
    auto add = inner.getDefiningOp<arith::AddFOp>();
    if (!add || !add->hasOneUse() ||
        (add->hasAttr(kernel::kUnroundedAttr) &&
         computeElementType(type.getElementType()) != type.getElementType()))
      continue;
    ThreeSum sum{inputOf(loop, add.getLhs()), inputOf(loop, add.getRhs()),
                 inputOf(loop, last)};
    if (!sum.x || !sum.y || !sum.z || sum.x == sum.y || sum.x == sum.z ||
        sum.y == sum.z)
      continue;
    if (llvm::all_of(ValueRange{sum.x, sum.y, sum.z},
                     [&](Value v) { return v.getType() == type; }))
      return sum;
  }
  return std::nullopt;
}

/// Folds sums of products into the products: a loop adding a `matmul`'s
/// product and another buffer (a residual without a bias; the gradients
/// of one input from two products) becomes `matmul_add` with that buffer
/// as its addend, and one adding three buffers, two of them products
/// (the gradients of q, k and v's common input), two `matmul_add`s, the
/// first adding the inner sum into its product's buffer.
void foldProductSums(func::FuncOp function) {
  for (kernel::ElementwiseOp loop : stepLoops(function)) {
    if (std::optional<std::pair<Value, Value>> sum = matchSum(loop)) {
      for (auto [product, addend] :
           {*sum, std::pair(sum->second, sum->first)}) {
        kernel::CallOp matmul = producerOf(loop, product, Reads::ViewOfBiased);
        if (!matmul)
          continue;
        OpBuilder b(loop);
        fuseAtLoop(loop, matmul, product, "matmul_add",
                   withAddend(b, matmul, addend), ValueRange{loop.getOutput()});
        break;
      }
      continue;
    }
    std::optional<ThreeSum> sum = matchThreeSum(loop);
    if (!sum)
      continue;
    kernel::CallOp last = producerOf(loop, sum->z);
    if (!last)
      continue;
    for (auto [product, addend] :
         {std::pair(sum->y, sum->x), std::pair(sum->x, sum->y)}) {
      kernel::CallOp inner = producerOf(loop, product);
      if (!inner)
        continue;
      // (addend + product) into the product's buffer, then z's product
      // plus that into the loop's output: the loop's sums in its order.
      OpBuilder b(loop);
      SmallVector<Value> inputs(inner.getInputs());
      inputs.push_back(addend);
      auto first =
          kernel::CallOp::create(b, inner.getLoc(), "matmul_add", inputs,
                                 ValueRange{product}, inner.getConfig());
      addLoc(first, loop.getLoc());
      inputs.assign(last.getInputs().begin(), last.getInputs().end());
      inputs.push_back(product);
      fuseAtLoop(loop, last, sum->z, "matmul_add", inputs,
                 ValueRange{loop.getOutput()});
      inner.erase();
      break;
    }
  }
}

/// Whether `loop`, in the step's block, only casts its one input of the
/// same shape with a `CastOp` (arith.truncf, arith.extf) between a
/// narrower float type (bf16, f16) and its compute type (f32).
template <typename CastOp> bool onlyCasts(kernel::ElementwiseOp loop) {
  if (!isa<func::FuncOp>(loop->getParentOp()) || loop.getInputs().size() != 1 ||
      loop.getOutputs().size() != 1 ||
      loop.getBody().front().getOperations().size() != 2)
    return false;
  auto op = loop.getYielded().front().getDefiningOp<CastOp>();
  Value input = loop.getInputs().front();
  if (!op || inputOf(loop, op.getIn()) != input)
    return false;
  auto in = cast<MemRefType>(input.getType());
  auto out = cast<MemRefType>(loop.getOutput().getType());
  constexpr bool truncates = std::is_same_v<CastOp, arith::TruncFOp>;
  Type narrow = truncates ? out.getElementType() : in.getElementType();
  Type wide = truncates ? in.getElementType() : out.getElementType();
  return in.getShape() == out.getShape() && narrow != wide &&
         computeElementType(narrow) == wide;
}

/// The loops of `function` that only narrow their input (onlyCasts), in
/// program order: what the layer-norm folds below look for.
SmallVector<kernel::ElementwiseOp> narrowingLoops(func::FuncOp function) {
  SmallVector<kernel::ElementwiseOp> loops;
  function.walk([&](kernel::ElementwiseOp loop) {
    if (onlyCasts<arith::TruncFOp>(loop))
      loops.push_back(loop);
  });
  return loops;
}

/// Folds each cast of a layer norm's result to a narrower float type (an
/// f32 layer norm feeding bf16 products) into the layer norm:
/// `layer_norm_narrow`, at the loop, storing the narrow type.
void foldNarrowNorms(func::FuncOp function) {
  for (kernel::ElementwiseOp loop : narrowingLoops(function)) {
    Value wide = loop.getInputs().front();
    kernel::CallOp norm =
        soleWriterBefore(loop, wide, kernel::LibraryKernelId::layer_norm,
                         std::nullopt, /*throughView=*/true);
    if (!norm)
      continue;
    fuseAtLoop(loop, norm, wide, "layer_norm_narrow", norm.getInputs(),
               ValueRange{loop.getOutput()});
  }
}

/// The loop that widens `gradient`, the result's gradient `norm` (a
/// `layer_norm_backward` call) reads, from the products' type: a cast of
/// its one input into `gradient` (or the buffer a view `gradient` reads,
/// GPT-2's [B*T, C] product's gradient), an alloc of its own that only the
/// loop and the call (as that input alone) use, before the call in its
/// block and on its stream.
kernel::ElementwiseOp wideningLoopOf(kernel::CallOp norm, Value gradient) {
  if (llvm::count(norm->getOperands(), gradient) != 1)
    return nullptr;
  Value stored = storedBuffer(gradient, /*throughView=*/true);
  return soleWriter<kernel::ElementwiseOp>(
      norm, stored,
      [&](kernel::ElementwiseOp loop) {
        return loop.getOutput() == stored && onlyCasts<arith::ExtFOp>(loop);
      },
      stored == gradient ? nullptr : gradient.getDefiningOp());
}

/// The `layer_norm_backward` call whose input gradient (first output)
/// `narrow` casts, when it can move to the loop: the last op before the
/// loop writing that buffer, in its block and on its stream, with nothing
/// between them writing what it reads or using what it writes, and the
/// loop's output no buffer it reads or writes.
kernel::CallOp narrowedGradientOf(kernel::ElementwiseOp narrow) {
  Value wide = narrow.getInputs().front();
  Value root = kernel::rootBuffer(wide);
  // A call's output is an alloc; an argument (a weight's cast) is written
  // by no call, so the walk back would find nothing.
  if (!root.getDefiningOp<kernel::AllocOp>())
    return nullptr;
  Operation *writer = narrow->getPrevNode();
  while (writer && llvm::none_of(kernel::writtenBuffers(writer), [&](Value v) {
           return kernel::rootBuffer(v) == root;
         }))
    writer = writer->getPrevNode();
  auto norm = dyn_cast_or_null<kernel::CallOp>(writer);
  if (!norm ||
      !kernel::isCallOf(norm, kernel::LibraryKernelId::layer_norm_backward) ||
      norm.getOutputs().front() != wide ||
      kernel::streamOf(norm) != kernel::streamOf(narrow))
    return nullptr;
  Value output = kernel::rootBuffer(narrow.getOutput());
  for (Value input : norm.getInputs())
    if (kernel::rootBuffer(input) == output ||
        writtenBetween(norm, narrow, kernel::rootBuffer(input)))
      return nullptr;
  for (Value result : norm.getOutputs())
    if (kernel::rootBuffer(result) == output ||
        usedBetween(norm, narrow, kernel::rootBuffer(result)))
      return nullptr;
  return norm;
}

/// Folds, under mixed precision, the narrowing of a layer norm's input
/// gradient (for the products) after its backward into the call, and the
/// widening of its result gradient (the products' gradient) before it
/// where one loop does only that: `layer_norm_backward_narrow`, at the
/// narrowing loop; where the result gradient is no such widening (a sum
/// of several products' gradients, Llama's q, k and v), the narrowing
/// alone: `layer_norm_backward_narrow_out`.
void foldNarrowNormGradients(func::FuncOp function) {
  for (kernel::ElementwiseOp narrow : narrowingLoops(function)) {
    kernel::CallOp norm = narrowedGradientOf(narrow);
    if (!norm)
      continue;
    Value gradient = norm.getInputs()[2];
    kernel::ElementwiseOp widen = wideningLoopOf(norm, gradient);
    Value narrowGradient = widen ? widen.getInputs().front() : Value();
    if (widen) {
      Value root = kernel::rootBuffer(narrowGradient);
      if (cast<MemRefType>(narrowGradient.getType()).getElementType() !=
              cast<MemRefType>(narrow.getOutput().getType()).getElementType() ||
          root == kernel::rootBuffer(narrow.getOutput()) ||
          writtenBetween(widen, narrow, root))
        widen = nullptr;
    }
    OpBuilder b(narrow);
    SmallVector<Value> inputs(norm.getInputs());
    if (widen)
      inputs[2] = shapedLike(b, narrowGradient, gradient.getType());
    SmallVector<Value> outputs(norm.getOutputs());
    outputs.push_back(narrow.getOutput());
    auto fused = kernel::CallOp::create(
        b, norm.getLoc(),
        widen ? "layer_norm_backward_narrow" : "layer_norm_backward_narrow_out",
        inputs, outputs, norm.getConfig());
    if (widen)
      addLoc(fused, widen.getLoc());
    addLoc(fused, narrow.getLoc());
    narrow.erase();
    norm.erase();
    if (widen) {
      widen.erase();
      eraseBuffer(gradient);
    }
  }
}

/// What a loop adds in its compute type (f32) from half products: the
/// inputs of the narrower type it widens, in the order it adds them, the
/// addend already in f32, if any, and the bias the loop adds to a single
/// product before widening it, if any.
struct WideSum {
  SmallVector<Value> products;
  Value addend, bias;
};

/// The sum `loop` computes when its one output, of a half type's compute
/// type, is `addend + widen(p)` (a residual in f32 adding a product) or
/// `addend + widen(p + bias)` (adding a linear layer's output whose bias
/// the loop adds, rounded to the narrower type: a row vector of it), or
/// the widened sum of one or more inputs in the narrower type whose sums
/// are all unrounded, so computed in f32 (`widen((p1 + p2) + p3)`: one
/// input's gradient from several products; `widen(p)`: from one). Each
/// sum either way round; the inputs distinct and of the output's shape.
std::optional<WideSum> matchWideSum(kernel::ElementwiseOp loop) {
  if (loop.getOutputs().size() != 1)
    return std::nullopt;
  auto type = cast<MemRefType>(loop.getOutput().getType());
  Block &body = loop.getBody().front();
  auto narrowInput = [&](Value value) -> Value {
    Value input = inputOf(loop, value);
    auto inputType = input ? cast<MemRefType>(input.getType()) : MemRefType();
    if (!inputType || inputType.getShape() != type.getShape() ||
        inputType.getElementType() == type.getElementType() ||
        computeElementType(inputType.getElementType()) != type.getElementType())
      return Value();
    return input;
  };
  WideSum sum;
  Value yielded = loop.getYielded().front();
  // addend + widen(p): three ops with the yield; addend + widen(p + bias):
  // four.
  if (auto add = yielded.getDefiningOp<arith::AddFOp>()) {
    size_t ops = body.getOperations().size();
    if (ops != 3 && ops != 4)
      return std::nullopt;
    // p + bias, rounded: the product and the bias it adds.
    auto biased = [&](Value value) -> std::pair<Value, Value> {
      arith::AddFOp add = roundedAdd(value);
      std::optional<std::pair<Value, Value>> found;
      if (add)
        found = productAndBias(loop, add, narrowInput);
      return found ? *found : std::pair<Value, Value>();
    };
    for (auto [widened, addend] : {std::pair(add.getLhs(), add.getRhs()),
                                   std::pair(add.getRhs(), add.getLhs())}) {
      auto widen = widened.getDefiningOp<arith::ExtFOp>();
      Value input = inputOf(loop, addend);
      if (!widen || !input || input.getType() != type)
        continue;
      auto [product, bias] =
          ops == 3 ? std::pair(narrowInput(widen.getIn()), Value())
                   : biased(widen.getIn());
      if (product) {
        sum.products.push_back(product);
        sum.addend = input;
        sum.bias = bias;
        return sum;
      }
    }
    return std::nullopt;
  }
  // widen(((p1 + p2) + p3) ...), every sum unrounded.
  auto widen = yielded.getDefiningOp<arith::ExtFOp>();
  if (!widen)
    return std::nullopt;
  // A chain: each sum adds an input to an input or to the inner sum,
  // which comes first, so the calls add in the loop's order.
  std::function<bool(Value)> collect = [&](Value value) {
    if (Value input = narrowInput(value)) {
      sum.products.push_back(input);
      return true;
    }
    auto add = value.getDefiningOp<arith::AddFOp>();
    if (!add || !add->hasAttr(kernel::kUnroundedAttr) || !add->hasOneUse())
      return false;
    bool rhsInput = static_cast<bool>(narrowInput(add.getRhs()));
    Value inner = rhsInput ? add.getLhs() : add.getRhs();
    Value input = rhsInput ? add.getRhs() : add.getLhs();
    return narrowInput(input) && collect(inner) && collect(input);
  };
  if (!collect(widen.getIn()) ||
      body.getOperations().size() != sum.products.size() + 1)
    return std::nullopt;
  llvm::SmallPtrSet<Value, 4> distinct(sum.products.begin(),
                                       sum.products.end());
  if (distinct.size() != sum.products.size())
    return std::nullopt;
  return sum;
}

/// Folds, under mixed precision, the f32 sums of half products into the
/// products: `addend + widen(p)` (a residual, the bias already in p's
/// call, or `addend + widen(p + bias)`, the bias in the loop) becomes
/// `matmul_add_wide` at the loop; `widen(p1 + p2 + ...)`
/// with unrounded sums becomes `matmul_wide` of p1 into an f32 buffer and
/// a `matmul_add_wide` adding each next product to the sum so far, the
/// last into the loop's output: the loop's sums in its order.
void foldWideSums(func::FuncOp function) {
  for (kernel::ElementwiseOp loop : stepLoops(function)) {
    std::optional<WideSum> sum = matchWideSum(loop);
    if (!sum)
      continue;
    // A bias the loop adds goes to a call that adds none, along the
    // loop's last dimension: the product's.
    SmallVector<kernel::CallOp> products;
    for (Value product : sum->products)
      products.push_back(producerOf(
          loop, product, sum->bias ? Reads::View : Reads::ViewOfBiased));
    if (llvm::is_contained(products, kernel::CallOp()) ||
        (sum->bias && !addsAlongLast(products.front(), loop)))
      continue;
    // One product widened alone only right after it (buffers and views
    // between): a weight's gradient widened for the optimizer at the
    // step's end stays a half product, whose operands are not kept alive
    // to the end, nor its widened copy from its product on.
    if (products.size() == 1 && !sum->addend &&
        llvm::any_of(
            llvm::make_range(std::next(products.front()->getIterator()),
                             loop->getIterator()),
            [](Operation &op) {
              return !isa<kernel::AllocOp, kernel::ViewOp>(op);
            }))
      continue;
    // Each call adds the sum so far (the addend, or the previous call's
    // f32 result) to its product; the first without one is matmul_wide.
    OpBuilder b(loop);
    Type wide = loop.getOutput().getType();
    Value sofar = sum->addend;
    for (auto [i, matmul] : llvm::enumerate(products)) {
      Type shape = matmul.getOutputs().front().getType();
      bool last = i + 1 == products.size();
      Value into =
          last ? shapedLike(b, loop.getOutput(), shape)
               : kernel::AllocOp::create(
                     b, loop.getLoc(),
                     MemRefType::get(cast<MemRefType>(shape).getShape(),
                                     cast<MemRefType>(wide).getElementType()),
                     IntegerAttr());
      SmallVector<Value> inputs = sofar
                                      ? withAddend(b, matmul, sofar)
                                      : SmallVector<Value>(matmul.getInputs());
      if (sum->bias)
        inputs.push_back(sum->bias);
      auto call = kernel::CallOp::create(
          b, matmul.getLoc(), sofar ? "matmul_add_wide" : "matmul_wide", inputs,
          ValueRange{into}, matmul.getConfig());
      addLoc(call, loop.getLoc());
      sofar = into;
    }
    loop.erase();
    for (auto [matmul, product] : llvm::zip(products, sum->products)) {
      matmul.erase();
      eraseBuffer(product);
    }
  }
}

struct MatmulEpiloguesPass
    : public mlir::ztc::impl::MatmulEpiloguesPassBase<MatmulEpiloguesPass> {
  void runOnOperation() override {
    foldBiasGradients(getOperation());
    foldResidualGradients(getOperation());
    foldNarrowNorms(getOperation());
    foldNarrowNormGradients(getOperation());
    SmallVector<kernel::ElementwiseOp> loops;
    getOperation().walk(
        [&](kernel::ElementwiseOp loop) { loops.push_back(loop); });
    // Each rewrite erases only its loop, its product and the product's
    // buffer, which no other loop reads.
    for (kernel::ElementwiseOp loop : loops) {
      std::optional<Epilogue> epilogue = matchEpilogue(loop);
      if (!epilogue)
        continue;
      kernel::CallOp matmul = producerOf(loop, epilogue->product, Reads::View);
      // The bias adds along the loop's last dimension: the product's.
      if (!matmul || !addsAlongLast(matmul, loop))
        continue;
      OpBuilder b(loop);
      SmallVector<Value> inputs(matmul.getInputs());
      if (epilogue->addend)
        inputs.push_back(shapedLike(b, epilogue->addend,
                                    matmul.getOutputs().front().getType()));
      inputs.push_back(epilogue->bias);
      fuseAtLoop(loop, matmul, epilogue->product,
                 epilogue->addend ? "matmul_add" : "matmul", inputs,
                 ValueRange{loop.getOutput()});
    }
    // After the bias epilogues, which take the sums with a bias.
    foldProductSums(getOperation());
    foldWideSums(getOperation());
  }
};

} // namespace
