//===- OnnxBase.td - onnx dialect definition ---------------*- tablegen -*-===//
//
// The onnx dialect holds an ONNX graph exactly as imported: one generic op per
// node. It carries no semantics of its own; the conversion to `nn` (keyed by
// op type and since-version) gives nodes their meaning, so the importer stays
// a plain protobuf walk and conversions are testable in plain .mlir.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_ONNX_IR_ONNXBASE_TD
#define ZTC_DIALECTS_ONNX_IR_ONNXBASE_TD

include "mlir/IR/OpBase.td"

def Onnx_Dialect : Dialect {
  let name = "onnx";
  let cppNamespace = "::mlir::ztc::onnx";
  let summary = "ONNX graphs as imported, one generic op per node";
  let description = [{
    An imported ONNX graph is a `func.func` whose arguments are the graph
    inputs followed by the float initializers (weights, never copied into the
    IR), each tagged with `onnx.name`. Every node becomes an `onnx.node`
    carrying its op type, domain, the model's opset for that domain and its
    attributes; its location is the ONNX node name. Results whose type ONNX
    does not declare have type `none` until the conversion to `nn` infers it.
  }];
}

/// Base class of onnx ops.
class Onnx_Op<string mnemonic, list<Trait> traits = []>
    : Op<Onnx_Dialect, mnemonic, traits>;

#endif // ZTC_DIALECTS_ONNX_IR_ONNXBASE_TD
