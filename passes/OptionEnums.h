//===- OptionEnums.h - the closed sets of ztc's options ---------*- C++ -*-===//
//
// Every option whose values form a closed set (a precision, a loss, a ZeRO
// stage, ...) is an enum, spelled once in a table below. The tables give the
// pass options and the pipeline's options their values (`closedSet`), so the
// option parser rejects what is not in them; the manifest and the reports
// print a value by its first spelling (`spell`); and an error lists the
// spellings (`spellings`). A table may spell a value twice (an alias): the
// first spelling is the value's own.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_OPTIONENUMS_H
#define ZTC_PASSES_OPTIONENUMS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/ErrorHandling.h"

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace mlir::ztc {

/// A value of a closed set as the command line writes it, with its help.
template <typename E> struct Spelling {
  E value;
  llvm::StringLiteral name;
  llvm::StringLiteral help;
};

/// `--precision`: how the step computes.
enum class Precision { Fp32, Bf16, Fp16, Fp64 };
inline constexpr Spelling<Precision> kPrecisions[] = {
    {Precision::Fp32, "fp32", "as the model is written"},
    {Precision::Bf16, "bf16", "mixed precision in bfloat16"},
    {Precision::Fp16, "fp16", "mixed precision in float16, loss scaled"},
    {Precision::Fp64, "fp64", "every float promoted to double"}};

/// ztc-autocast's half type.
enum class HalfType { Bf16, Fp16 };
inline constexpr Spelling<HalfType> kHalfTypes[] = {
    {HalfType::Bf16, "bf16", "bfloat16"}, {HalfType::Fp16, "fp16", "float16"}};

/// `--loss`: what ztc-attach-loss builds.
enum class LossKind { Auto, CrossEntropy, Mse, None };
inline constexpr Spelling<LossKind> kLossKinds[] = {
    {LossKind::CrossEntropy, "cross_entropy", "softmax cross-entropy"},
    {LossKind::Mse, "mse", "mean squared error"},
    {LossKind::None, "none", "the model returns its loss"},
    {LossKind::Auto, "auto", "none for a model returning one scalar float"}};

/// `--optimizer`, with the Hugging Face Trainer's names of bitsandbytes'
/// AdamW8bit as aliases.
enum class OptimizerKind { Sgd, Adam, Adamw, Adam8bit, Adamw8bit };
inline constexpr Spelling<OptimizerKind> kOptimizerKinds[] = {
    {OptimizerKind::Sgd, "sgd", "SGD, with --momentum and --nesterov"},
    {OptimizerKind::Adam, "adam", "Adam (L2 weight decay)"},
    {OptimizerKind::Adamw, "adamw", "AdamW (decoupled weight decay)"},
    {OptimizerKind::Adam8bit, "adam8bit", "Adam, bitsandbytes' 8-bit states"},
    {OptimizerKind::Adamw8bit, "adamw8bit",
     "AdamW, bitsandbytes' 8-bit states"},
    {OptimizerKind::Adamw8bit, "adamw_bnb_8bit", "adamw8bit (the Trainer's)"},
    {OptimizerKind::Adamw8bit, "adamw_8bit", "adamw8bit (the Trainer's)"}};

/// `--grad-accum-dtype`: the gradient accumulators' element type.
enum class AccumType { Fp32, Bf16, Fp16 };
inline constexpr Spelling<AccumType> kAccumTypes[] = {
    {AccumType::Fp32, "fp32", "float32"},
    {AccumType::Bf16, "bf16", "bfloat16"},
    {AccumType::Fp16, "fp16", "float16"}};

/// `--comm-dtype`: the element type gradients are reduced in.
enum class CommType { Auto, Fp32, Fp16, Bf16 };
inline constexpr Spelling<CommType> kCommTypes[] = {
    {CommType::Auto, "auto", "the gradients' own"},
    {CommType::Fp32, "fp32", "float32"},
    {CommType::Fp16, "fp16", "float16"},
    {CommType::Bf16, "bf16", "bfloat16"}};

/// `--conv-layout`: f32 convolutions' activations.
enum class ConvLayout { Nhwc, Nchw };
inline constexpr Spelling<ConvLayout> kConvLayouts[] = {
    {ConvLayout::Nhwc, "nhwc", "channels last"},
    {ConvLayout::Nchw, "nchw", "ONNX's"}};

/// `--fuse-attention`: whether ztc-fuse-attention runs.
enum class FuseAttention { Auto, On, Off };
inline constexpr Spelling<FuseAttention> kFuseAttention[] = {
    {FuseAttention::Auto, "auto", "the target's default"},
    {FuseAttention::On, "on", "attention as one kernel"},
    {FuseAttention::Off, "off", "as the model writes it"}};

/// `--fuse-cross-entropy`: whether ztc-fuse-cross-entropy runs.
enum class FuseCrossEntropy { Auto, On, Off };
inline constexpr Spelling<FuseCrossEntropy> kFuseCrossEntropy[] = {
    {FuseCrossEntropy::Auto, "auto", "the target's default"},
    {FuseCrossEntropy::On, "on", "the classifier and its loss as one kernel"},
    {FuseCrossEntropy::Off, "off", "as the loss writes it"}};

/// `--base-dtype`: how a LoRA step holds its frozen base weights.
enum class BaseType { Model, Nf4 };
inline constexpr Spelling<BaseType> kBaseTypes[] = {
    {BaseType::Model, "model", "as the model has them"},
    {BaseType::Nf4, "nf4", "bitsandbytes' 4-bit NormalFloat (QLoRA)"}};

/// ztc-lora's `bias`: peft's LoraConfig.bias.
enum class LoraBias { None, All, LoraOnly };
inline constexpr Spelling<LoraBias> kLoraBiases[] = {
    {LoraBias::None, "none", "no bias trains"},
    {LoraBias::All, "all", "every bias trains"},
    {LoraBias::LoraOnly, "lora_only", "the adapted modules' biases train"}};

/// ztc-recompute's policy (the pipeline's `--recompute` adds budget=...).
enum class RecomputePolicy { None, Selective, Full, Sqrt, Budget };
inline constexpr Spelling<RecomputePolicy> kRecomputePolicies[] = {
    {RecomputePolicy::None, "none", "keep every activation"},
    {RecomputePolicy::Selective, "selective", "keep products and convolutions"},
    {RecomputePolicy::Full, "full", "keep each block's input"},
    {RecomputePolicy::Sqrt, "sqrt", "sqrt(n) checkpoints"},
    {RecomputePolicy::Budget, "budget",
     "the least recomputation under the byte budget"}};

/// `--zero`: the ZeRO stage.
enum class ZeroStage { DataParallel, OptimizerStates, Gradients, Parameters };
inline constexpr Spelling<ZeroStage> kZeroStages[] = {
    {ZeroStage::DataParallel, "0", "data parallel"},
    {ZeroStage::OptimizerStates, "1", "optimizer states sharded"},
    {ZeroStage::Gradients, "2", "gradients sharded too"},
    {ZeroStage::Parameters, "3", "parameters sharded too"}};

/// The stage's number.
inline unsigned stageNumber(ZeroStage stage) {
  return static_cast<unsigned>(stage);
}

/// The first spelling of `value` in `table` (`value` may be an option
/// holding one: only the table says which enum).
template <typename E, size_t N>
llvm::StringRef spell(const Spelling<E> (&table)[N],
                      typename std::common_type<E>::type value) {
  for (const Spelling<E> &spelling : table)
    if (spelling.value == value)
      return spelling.name;
  llvm_unreachable("a value without a spelling");
}

/// The value `name` spells in `table`, if any.
template <typename E, size_t N>
std::optional<E> parseSpelling(const Spelling<E> (&table)[N],
                               llvm::StringRef name) {
  for (const Spelling<E> &spelling : table)
    if (spelling.name == name)
      return spelling.value;
  return std::nullopt;
}

/// Every spelling of `table`, in order.
template <typename E, size_t N>
std::vector<std::string> spellings(const Spelling<E> (&table)[N]) {
  std::vector<std::string> names;
  for (const Spelling<E> &spelling : table)
    names.push_back(spelling.name.str());
  return names;
}

/// "a, b or c".
inline std::string listOfChoices(llvm::ArrayRef<std::string> names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

/// An option modifier (llvm::cl's `values` for a table): the option takes
/// exactly the spellings of `table`.
template <typename E> struct ClosedSet {
  llvm::ArrayRef<Spelling<E>> table;
  template <typename Opt> void apply(Opt &option) const {
    for (const Spelling<E> &spelling : table)
      option.getParser().addLiteralOption(spelling.name, spelling.value,
                                          spelling.help);
  }
};
template <typename E, size_t N>
ClosedSet<E> closedSet(const Spelling<E> (&table)[N]) {
  return {llvm::ArrayRef<Spelling<E>>(table)};
}

} // namespace mlir::ztc

#endif // ZTC_PASSES_OPTIONENUMS_H
