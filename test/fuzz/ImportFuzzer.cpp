//===- ImportFuzzer.cpp - ONNX import through conversion to nn ------------===//
//
// Built twice: ztc-fuzz-onnx-binary takes protobuf inputs and
// ztc-fuzz-onnx-text the text format (ZTC_FUZZ_TEXT); each rejects the
// other's inputs (they start with '<'), so the two corpora stay apart.
// Each input is imported and converted to the nn dialect with the pass
// pipeline `ztc import --emit nn` runs.
//
// Byte mutations rarely get a protobuf past its parser, so the binary
// target also mutates models as models (LLVMFuzzerCustomMutator below):
// node inputs and outputs dropped, repeated or renamed, op types swapped
// for others ztc converts, attributes, dimensions, initializers and the
// opset set to edge values, nodes removed or reordered.
//
// Oracle: the module converts (and verifies after every pass), or at least
// one error with a non-empty message says why; text-format errors are one
// line. The context is rebuilt every few thousand inputs so uniqued
// attributes do not grow without bound.
//
//===----------------------------------------------------------------------===//

#include "dialects/Onnx/Import/Importer.h"
#include "passes/Conversion/OnnxToNN/NodeConverter.h"
#include "passes/Passes.h"
#include "passes/Pipelines/Pipelines.h"
#include "test/fuzz/FuzzSupport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <limits>
#include <memory>
#include <random>

using namespace mlir;
namespace fz = ::ztc::fuzz;

namespace {

constexpr unsigned kInputsPerContext = 2000;

MLIRContext &freshContext() {
  static std::unique_ptr<MLIRContext> context;
  static unsigned uses = 0;
  if (!context || ++uses == kInputsPerContext) {
    uses = 0;
    context.reset();
    DialectRegistry registry;
    mlir::ztc::registerAllDialects(registry);
    context = std::make_unique<MLIRContext>(registry,
                                            MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    context->printOpOnDiagnostic(false);
  }
  return *context;
}

bool looksLikeText(StringRef bytes) {
  StringRef trimmed = bytes.ltrim();
  while (trimmed.starts_with("#"))
    trimmed = trimmed.split('\n').second.ltrim();
  return trimmed.starts_with("<");
}

using Rng = std::minstd_rand;

size_t pick(Rng &rng, size_t count) { return rng() % count; }

int64_t edgeInteger(Rng &rng) {
  static const int64_t values[] = {0,
                                   1,
                                   -1,
                                   2,
                                   3,
                                   -2,
                                   7,
                                   64,
                                   1 << 16,
                                   int64_t(1) << 31,
                                   int64_t(1) << 40,
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};
  return values[pick(rng, std::size(values))];
}

/// A value name of the graph: an input, initializer or node output.
std::string someValue(const ::onnx::GraphProto &graph, Rng &rng) {
  std::vector<std::string> names;
  for (const auto &input : graph.input())
    names.push_back(input.name());
  for (const auto &init : graph.initializer())
    names.push_back(init.name());
  for (const auto &node : graph.node())
    for (const std::string &output : node.output())
      names.push_back(output);
  names.push_back(""); // an absent optional input
  names.push_back("undefined");
  return names[pick(rng, names.size())];
}

void mutateNode(::onnx::GraphProto &graph, ::onnx::NodeProto &node, Rng &rng) {
  switch (pick(rng, 7)) {
  case 0: // one input fewer
    if (node.input_size())
      node.mutable_input()->RemoveLast();
    break;
  case 1: // one input more, or one replaced
    if (pick(rng, 2) || !node.input_size())
      node.add_input(someValue(graph, rng));
    else
      node.set_input(pick(rng, node.input_size()), someValue(graph, rng));
    break;
  case 2: // outputs
    if (pick(rng, 2) && node.output_size())
      node.mutable_output()->RemoveLast();
    else
      node.add_output("extra" + std::to_string(pick(rng, 4)));
    break;
  case 3: { // another op type
    SmallVector<StringRef> types =
        mlir::ztc::onnx_to_nn::ConverterRegistry::get().opTypes();
    node.set_op_type(types[pick(rng, types.size())].str());
    break;
  }
  case 4: { // an attribute's value
    if (!node.attribute_size())
      break;
    ::onnx::AttributeProto &attr =
        *node.mutable_attribute(pick(rng, node.attribute_size()));
    if (attr.has_i())
      attr.set_i(edgeInteger(rng));
    else if (attr.ints_size())
      attr.set_ints(pick(rng, attr.ints_size()), edgeInteger(rng));
    else if (attr.has_f())
      attr.set_f(pick(rng, 2) ? std::numeric_limits<float>::quiet_NaN()
                              : float(edgeInteger(rng)));
    else
      attr.Clear();
    break;
  }
  case 5: // an attribute removed
    if (node.attribute_size())
      node.mutable_attribute()->DeleteSubrange(pick(rng, node.attribute_size()),
                                               1);
    break;
  default: { // a new integer attribute of a common name
    static const char *names[] = {"axis",  "axes", "perm",    "keepdims",
                                  "group", "pads", "strides", "to"};
    ::onnx::AttributeProto *attr = node.add_attribute();
    attr->set_name(names[pick(rng, std::size(names))]);
    attr->set_type(::onnx::AttributeProto::INT);
    attr->set_i(edgeInteger(rng));
    break;
  }
  }
}

void mutateShape(::onnx::TypeProto &type, Rng &rng) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape())
    return;
  ::onnx::TensorShapeProto &shape =
      *type.mutable_tensor_type()->mutable_shape();
  if (!shape.dim_size() || pick(rng, 4) == 0) {
    shape.add_dim()->set_dim_value(pick(rng, 4));
    return;
  }
  ::onnx::TensorShapeProto::Dimension &dim =
      *shape.mutable_dim(pick(rng, shape.dim_size()));
  if (pick(rng, 3) == 0)
    dim.set_dim_param("n");
  else
    dim.set_dim_value(edgeInteger(rng));
}

void mutateModel(::onnx::ModelProto &model, Rng &rng) {
  ::onnx::GraphProto &graph = *model.mutable_graph();
  switch (pick(rng, 6)) {
  case 0:
  case 1:
    if (graph.node_size())
      mutateNode(graph, *graph.mutable_node(pick(rng, graph.node_size())), rng);
    break;
  case 2:
    if (graph.input_size())
      mutateShape(
          *graph.mutable_input(pick(rng, graph.input_size()))->mutable_type(),
          rng);
    break;
  case 3: { // an initializer's dims or element type
    if (!graph.initializer_size())
      break;
    ::onnx::TensorProto &init =
        *graph.mutable_initializer(pick(rng, graph.initializer_size()));
    if (pick(rng, 2) && init.dims_size())
      init.set_dims(pick(rng, init.dims_size()), edgeInteger(rng));
    else
      init.set_data_type(int32_t(pick(rng, 17)));
    break;
  }
  case 4: // the opset
    if (model.opset_import_size())
      model.mutable_opset_import(0)->set_version(int64_t(pick(rng, 26)));
    break;
  default: // a node removed, or two swapped
    if (graph.node_size() > 1 && pick(rng, 2))
      graph.mutable_node()->SwapElements(pick(rng, graph.node_size()),
                                         pick(rng, graph.node_size()));
    else if (graph.node_size())
      graph.mutable_node()->DeleteSubrange(pick(rng, graph.node_size()), 1);
    break;
  }
}

} // namespace

#if !ZTC_FUZZ_TEXT
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  Rng rng(seed);
  ::onnx::ModelProto model;
  // A quarter of the time (and for what does not parse) libFuzzer's own
  // byte mutations: the parser and the importer's checks need them too.
  if (pick(rng, 4) == 0 || !model.ParseFromArray(data, int(size)) ||
      !model.has_graph())
    return LLVMFuzzerMutate(data, size, maxSize);
  for (size_t i = 0, n = 1 + pick(rng, 3); i < n; ++i)
    mutateModel(model, rng);
  std::string bytes = model.SerializeAsString();
  if (bytes.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  StringRef bytes(reinterpret_cast<const char *>(data), size);
  if (looksLikeText(bytes) != bool(ZTC_FUZZ_TEXT))
    return -1; // the other target's input: keep it out of this corpus
  static const fz::ScratchDir baseDir("import");
  MLIRContext &context = freshContext();

  std::vector<std::string> errors;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      errors.push_back(diag.str());
    return success();
  });
  mlir::ztc::onnx::ImportOptions options;
  options.batchSize = 2;
  OwningOpRef<ModuleOp> module = mlir::ztc::onnx::importOnnxBytes(
      context, bytes, "model.onnx", baseDir.path(), options);
  bool ok = bool(module);
  if (ok) {
    PassManager pm(&context);
    mlir::ztc::buildOnnxToNNPipeline(pm);
    ok = succeeded(pm.run(*module));
  }
  if (ok)
    return 0;
  if (errors.empty())
    fz::fail("import", "failed without an error");
  for (const std::string &error : errors) {
    if (error.empty())
      fz::fail("import", "an empty error message");
    if (ZTC_FUZZ_TEXT)
      fz::requireOneLine(error, "text import");
  }
  return 0;
}
