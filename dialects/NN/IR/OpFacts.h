//===- OpFacts.h - what passes read off an nn op ----------------*- C++ -*-===//
//
// The C++ half of OpFacts.td: the cost and library-call interfaces, the
// traits that implement the shared cost rules, and the autocast classes,
// which ztc-recompute, ztc-autocast and ztc-convert-nn-to-kernel read off
// each op.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_NN_IR_OPFACTS_H
#define ZTC_DIALECTS_NN_IR_OPFACTS_H

#include "mlir/IR/OpDefinition.h"

#include <optional>

#include "dialects/NN/IR/OpFacts.h.inc"

namespace mlir::ztc::nn {

//===----------------------------------------------------------------------===//
// Cost
//===----------------------------------------------------------------------===//

/// The elements of `value`'s tensor; 0 unless it has a static shape.
int64_t staticElements(Value value);

/// NN_FlopsPerElement<N>: N FLOPs per element of the result.
template <int64_t N> struct FlopsPerElement {
  template <typename ConcreteType>
  class Impl : public OpTrait::TraitBase<ConcreteType, Impl> {
  public:
    int64_t estimateFlops() {
      return N * staticElements(this->getOperation()->getResult(0));
    }
  };
};

/// NN_FlopsPerInputElement: one FLOP per element of the first operand.
template <typename ConcreteType>
class FlopsPerInputElement
    : public OpTrait::TraitBase<ConcreteType, FlopsPerInputElement> {
public:
  int64_t estimateFlops() {
    return staticElements(this->getOperation()->getOperand(0));
  }
};

/// NN_NoFlops: the op moves data.
template <typename ConcreteType>
class NoFlops : public OpTrait::TraitBase<ConcreteType, NoFlops> {
public:
  int64_t estimateFlops() { return 0; }
};

//===----------------------------------------------------------------------===//
// Autocast class
//===----------------------------------------------------------------------===//

/// The autocast classes (OpFacts.td has what each means).
enum class ComputeClass { Half, Wide, Follow, Own };

template <typename ConcreteType>
class HalfCompute : public OpTrait::TraitBase<ConcreteType, HalfCompute> {};
template <typename ConcreteType>
class WideCompute : public OpTrait::TraitBase<ConcreteType, WideCompute> {};
template <typename ConcreteType>
class FollowCompute : public OpTrait::TraitBase<ConcreteType, FollowCompute> {};
template <typename ConcreteType>
class OwnCompute : public OpTrait::TraitBase<ConcreteType, OwnCompute> {};

/// The autocast class `op` declares; none for an op outside nn.
std::optional<ComputeClass> getComputeClass(Operation *op);

//===----------------------------------------------------------------------===//
// Library call
//===----------------------------------------------------------------------===//

/// NN_LibraryCall: the op's static getLibraryCallee, getLibraryConfig and
/// getLibraryConfigSetLater, generated from the trait's arguments, implement
/// LibraryCallOpInterface.
template <typename ConcreteType>
class LibraryCall : public OpTrait::TraitBase<ConcreteType, LibraryCall> {};

} // namespace mlir::ztc::nn

#endif // ZTC_DIALECTS_NN_IR_OPFACTS_H
