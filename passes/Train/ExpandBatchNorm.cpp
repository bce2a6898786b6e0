//===- ExpandBatchNorm.cpp - the ztc-expand-batch-norm pass ---------------===//
//
// Writes training-mode batch norms and their gradients, whole ops through
// autodiff and recomputation, as the reductions and elementwise ops that
// the kernel passes fuse into few passes over the activations. See the
// pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/GradientInterface.h"
#include "passes/Passes.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_EXPANDBATCHNORMPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// How a batch norm of an `[N, C, ...]` tensor reduces and broadcasts: the
/// axes it sums over (all but 1), the `[1, C, 1, ...]` shape of a channel
/// vector, the `[C]` one, and M, the elements each channel has.
struct Channels {
  SmallVector<int64_t> axes, broadcast, vector;
  double count;
};

Channels channelsOf(Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  Channels c;
  int64_t channels = type.getDimSize(1);
  for (int64_t dim = 0; dim < type.getRank(); ++dim)
    if (dim != 1)
      c.axes.push_back(dim);
  c.broadcast.assign(type.getRank(), 1);
  c.broadcast[1] = channels;
  c.vector = {channels};
  c.count = static_cast<double>(type.getNumElements()) /
            std::max<int64_t>(channels, 1);
  return c;
}

/// `1 / sqrt(var + epsilon)`, per channel.
Value rstdOf(nn::VjpBuilder &v, Value var, double epsilon) {
  return v.reciprocal(v.sqrt(v.add(var, v.scalar(var, epsilon))));
}

/// The statistics of one pass over x: the means of x and of its squares
/// in f64, where the square of a float of 24 significant bits is exact and
/// the sums keep 53, so the cancellation in E[x^2] - E[x]^2 costs the
/// variance about 2^-53 * (mean / deviation)^2 relatively: below f32's
/// rounding unless a channel's mean lies some 10^4 standard deviations
/// from zero. Both means read x alone, so ztc-fuse sums them side by side
/// in one reduction. Rounded to x's type; a variance below zero (a constant
/// channel's, by rounding) is 0.
std::pair<Value, Value> onePassStatistics(nn::VjpBuilder &v, Value x,
                                          const Channels &c) {
  Type element = cast<RankedTensorType>(x.getType()).getElementType();
  Type f64 = Float64Type::get(x.getContext());
  // A cast for each mean, so each fuses into its reduction (one shared
  // cast would be stored for both).
  Value mean = v.reduceMean(v.castTo(x, f64), c.axes, /*keepdims=*/true);
  Value wide = v.castTo(x, f64);
  Value squares = v.reduceMean(v.mul(wide, wide), c.axes, /*keepdims=*/true);
  Value var = v.sub(squares, v.mul(mean, mean));
  Value zero = v.scalar(var, 0.0);
  var = v.where(v.less(var, zero), zero, var);
  return {v.castTo(mean, element), v.castTo(var, element)};
}

/// Step 1: the mean, the variance, and the normalized input scaled and
/// shifted, which subtracts the mean itself, so it reads no stored centered
/// input. Inputs of 32 bits or fewer take their statistics in one pass
/// (onePassStatistics); f64 ones in two, the mean and then the mean of the
/// squared differences from it.
void expand(nn::BatchNormTrainingOp op) {
  OpBuilder b(op);
  nn::VjpBuilder v(b, op.getLoc());
  Value x = op.getX();
  Channels c = channelsOf(x);
  Value mean, var;
  if (cast<RankedTensorType>(x.getType()).getElementType().isF64()) {
    mean = v.reduceMean(x, c.axes, /*keepdims=*/true);
    Value centered = v.sub(x, mean);
    var = v.reduceMean(v.mul(centered, centered), c.axes, /*keepdims=*/true);
  } else {
    std::tie(mean, var) = onePassStatistics(v, x, c);
  }
  Value rstd = rstdOf(v, var, op.getEpsilon().convertToDouble());
  Value normalized = v.mul(v.sub(x, mean), rstd);
  Value scaled = v.mul(normalized, v.reshape(op.getScale(), c.broadcast));
  Value result = v.add(scaled, v.reshape(op.getBias(), c.broadcast));
  Value meanVector = v.reshape(mean, c.vector);
  Value varVector = v.reshape(var, c.vector);
  op.replaceAllUsesWith(ValueRange{result, meanVector, varVector});
  op.erase();
}

/// Step 2: the two sums over each channel, then the input's gradient
/// elementwise from them; the scale's and bias's from the sums alone.
void expand(nn::BatchNormTrainingBackwardOp op) {
  OpBuilder b(op);
  nn::VjpBuilder v(b, op.getLoc());
  Value x = op.getX(), g = op.getGradOutput();
  Channels c = channelsOf(x);
  Value mean = v.reshape(op.getMean(), c.broadcast);
  Value var = v.reshape(op.getVar(), c.broadcast);
  Value rstd = rstdOf(v, var, op.getEpsilon().convertToDouble());
  Value sum = v.reduceSum(g, c.axes, /*keepdims=*/true);
  Value centered = v.sub(x, mean);
  Value sumCentered =
      v.reduceSum(v.mul(g, centered), c.axes, /*keepdims=*/true);
  // dx = scale * rstd * (g - sum / M - (x - mean) * rstd^2 * sumCentered / M)
  Value gain = v.mul(v.reshape(op.getScale(), c.broadcast), rstd);
  Value perElement = v.scalar(sum, 1.0 / c.count);
  Value shift = v.mul(sum, perElement);
  Value slope = v.mul(v.mul(rstd, rstd), v.mul(sumCentered, perElement));
  // The loop subtracts the mean itself, as the sum above does, so neither
  // reads a stored centered input.
  Value deviation = v.mul(v.sub(x, mean), slope);
  Value dx = v.mul(v.sub(v.sub(g, shift), deviation), gain);
  Value gradScale = v.reshape(v.mul(sumCentered, rstd), c.vector);
  Value gradBias = v.reshape(sum, c.vector);
  op.replaceAllUsesWith(ValueRange{dx, gradScale, gradBias});
  op.erase();
}

struct ExpandBatchNormPass
    : public mlir::ztc::impl::ExpandBatchNormPassBase<ExpandBatchNormPass> {
  void runOnOperation() override {
    getOperation().walk([](Operation *op) {
      if (auto norm = dyn_cast<nn::BatchNormTrainingOp>(op))
        expand(norm);
      else if (auto grad = dyn_cast<nn::BatchNormTrainingBackwardOp>(op))
        expand(grad);
    });
  }
};

} // namespace
