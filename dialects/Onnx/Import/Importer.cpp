//===- Importer.cpp - ONNX protobuf to onnx dialect -----------------------===//
//
// A plain walk over ModelProto: graph inputs and float initializers become
// arguments of `func.func @main`, other initializers become `onnx.constant`,
// and every node becomes one `onnx.node` located at its ONNX node name. No
// semantics are applied here; the conversion to `nn` does that. Problems are
// reported as diagnostics naming the file, the node and the value at fault.
//
//===----------------------------------------------------------------------===//

#include "dialects/Onnx/Import/Importer.h"
#include "dialects/NN/IR/ShapeLimits.h"
#include "dialects/Onnx/Import/TextParser.h"

#include "dialects/Onnx/IR/OnnxOps.h"
#include "dialects/Train/IR/TrainOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/onnx_pb.h"

#include <optional>

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::onnx;

namespace {

/// The highest default-domain opset whose operators ztc knows; newer models
/// are rejected up front rather than half-understood.
constexpr int64_t kMaxDefaultOpset = 23;

/// Returns the ONNX name of a tensor element type, for messages.
std::string dataTypeName(int type) {
  // Types newer than the protobuf classes libonnx ships.
  static const char *const newer[] = {
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
      "UINT4",        "INT4",           "FLOAT4E2M1"};
  if (type >= 17 && type <= 23)
    return newer[type - 17];
  if (::onnx::TensorProto_DataType_IsValid(type))
    return ::onnx::TensorProto_DataType_Name(
        static_cast<::onnx::TensorProto_DataType>(type));
  return "type#" + std::to_string(type);
}

/// Why `path` (symlinks followed) is not a file ztc reads: a directory, a
/// device or a FIFO would block or never end (/dev/zero). Nothing when it
/// is a regular file or does not exist (the read then says so).
static std::optional<std::string> notRegularFile(StringRef path) {
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status, /*follow=*/true))
    return std::nullopt;
  switch (status.type()) {
  case llvm::sys::fs::file_type::regular_file:
    return std::nullopt;
  case llvm::sys::fs::file_type::directory_file:
    return std::string("is a directory");
  case llvm::sys::fs::file_type::fifo_file:
    return std::string("is a FIFO, not a regular file");
  default:
    return std::string("is a device or socket, not a regular file");
  }
}

/// The file an external-data `location` names, when it lies inside the
/// model's directory `baseDir`: relative, without "..", and inside it once
/// symbolic links are resolved (a model is untrusted input; ONNX's own
/// checker refuses the same). Otherwise `why` says what is wrong.
std::optional<std::string>
confinedExternalPath(StringRef baseDir, StringRef location, std::string &why) {
  if (location.empty()) {
    why = "names no location";
    return std::nullopt;
  }
  if (llvm::sys::path::is_absolute(location) ||
      llvm::sys::path::has_root_name(location) || location.contains('\0')) {
    why = "is an absolute path";
    return std::nullopt;
  }
  for (StringRef part : llvm::make_range(llvm::sys::path::begin(location),
                                         llvm::sys::path::end(location)))
    if (part == "..") {
      why = "climbs out with '..'";
      return std::nullopt;
    }
  SmallString<256> path(baseDir.empty() ? StringRef(".") : baseDir);
  llvm::sys::path::append(path, location);
  // A link may point anywhere: the real paths must nest.
  SmallString<256> realBase, realPath;
  if (llvm::sys::fs::real_path(baseDir.empty() ? StringRef(".") : baseDir,
                               realBase) ||
      llvm::sys::fs::real_path(path, realPath)) {
    why = "is missing";
    return std::nullopt;
  }
  StringRef inside = realPath.str();
  if (!inside.consume_front(realBase.str()) ||
      !(inside.empty() || llvm::sys::path::is_separator(inside.front()))) {
    why = "leads out of the model's directory through a symbolic link";
    return std::nullopt;
  }
  if (notRegularFile(realPath)) {
    why = "is not a regular file";
    return std::nullopt;
  }
  return path.str().str();
}

/// The metadata property in which python/ztc_export.py records what each
/// floating-point initializer is.
constexpr llvm::StringLiteral kRolesKey = "ztc.initializers";

/// What `ztc.initializers` says an initializer is.
enum class InitializerRole { Parameter, Buffer, Constant };

/// One initializer's entry: its role and the other state-dict names of a
/// tied parameter.
struct InitializerEntry {
  InitializerRole role;
  SmallVector<std::string> tied;
};

/// Builds a module from one ModelProto; holds the per-import state.
class ModelImporter {
public:
  friend LogicalResult mlir::ztc::onnx::readInitializers(
      MLIRContext &, StringRef,
      function_ref<LogicalResult(StringRef, StringRef)>);
  friend LogicalResult mlir::ztc::onnx::readTiedParameters(
      MLIRContext &, StringRef, bool &,
      std::map<std::string, std::vector<std::string>> &);
  ModelImporter(MLIRContext &context, StringRef displayName, StringRef baseDir,
                const ImportOptions &options)
      : context(context), builder(&context), displayName(displayName.str()),
        baseDir(baseDir.str()), options(options),
        fileLoc(FileLineColLoc::get(&context, displayName, 0, 0)) {}

  OwningOpRef<ModuleOp> import(const ::onnx::ModelProto &model);

private:
  InFlightDiagnostic error(Location loc) { return emitError(loc); }
  InFlightDiagnostic error() { return emitError(fileLoc); }

  /// The model's `ztc.initializers`, parsed; nullopt when it has none.
  FailureOr<std::optional<llvm::StringMap<InitializerEntry>>>
  readRoles(const ::onnx::ModelProto &model);
  /// Warns of float initializers whose role nothing states: those without
  /// an entry in `ztc.initializers`, or, in a PyTorch export without it,
  /// those with generated (undotted) names.
  void warnUnclassified(
      const ::onnx::ModelProto &model,
      const std::optional<llvm::StringMap<InitializerEntry>> &roles,
      ArrayRef<std::string> trained);

  Location nodeLoc(const ::onnx::NodeProto &node);
  FailureOr<Type> elementType(int dataType, Location loc, StringRef what);
  FailureOr<Type> valueType(const ::onnx::TypeProto &type, Location loc,
                            StringRef what, bool requireStatic);
  LogicalResult bindInputShapes(const ::onnx::GraphProto &graph);
  FailureOr<std::string> tensorBytes(const ::onnx::TensorProto &tensor,
                                     Location loc, RankedTensorType &type);
  FailureOr<ElementsAttr> tensorValue(const ::onnx::TensorProto &tensor,
                                      Location loc);
  FailureOr<std::string> readExternal(const ::onnx::TensorProto &tensor,
                                      size_t expectedBytes, bool readData,
                                      Location loc);
  FailureOr<::onnx::TensorProto>
  readTensorFile(StringRef path, StringRef inputName, Location loc);
  FailureOr<NamedAttribute> attribute(const ::onnx::AttributeProto &attr,
                                      Location loc);
  LogicalResult importNodes(const ::onnx::GraphProto &graph);

  MLIRContext &context;
  OpBuilder builder;
  std::string displayName;
  std::string baseDir;
  const ImportOptions &options;
  Location fileLoc;

  /// ONNX value name -> SSA value, in graph order.
  llvm::StringMap<Value> values;
  /// ONNX value name -> declared type (graph outputs and value_info).
  llvm::StringMap<const ::onnx::TypeProto *> declaredTypes;
  /// Input name -> bound shape (--input-shape, then ImportOptions::shapeFor).
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Symbolic dimension name -> bound size.
  llvm::StringMap<int64_t> symbolSizes;
  /// Created on demand: stands for absent optional inputs.
  Value noneValue;
  /// Opset of the default domain.
  int64_t defaultOpset = 0;
  llvm::StringMap<int64_t> opsets;
};

Location ModelImporter::nodeLoc(const ::onnx::NodeProto &node) {
  // Unnamed nodes (common in hand-written models) are named after their first
  // output, which is unique in a valid graph.
  std::string name = node.name();
  if (name.empty())
    name = node.output_size() ? node.output(0) : node.op_type();
  return NameLoc::get(StringAttr::get(&context, name), fileLoc);
}

FailureOr<Type> ModelImporter::elementType(int dataType, Location loc,
                                           StringRef what) {
  Builder b(&context);
  switch (dataType) {
  case ::onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case ::onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case ::onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case ::onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case ::onnx::TensorProto::INT64:
    return b.getI64Type();
  case ::onnx::TensorProto::INT32:
    return b.getI32Type();
  case ::onnx::TensorProto::INT16:
    return b.getI16Type();
  case ::onnx::TensorProto::INT8:
    return b.getI8Type();
  case ::onnx::TensorProto::BOOL:
    return b.getI1Type();
  case ::onnx::TensorProto::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case ::onnx::TensorProto::UINT16:
    return b.getIntegerType(16, /*isSigned=*/false);
  case ::onnx::TensorProto::UINT32:
    return b.getIntegerType(32, /*isSigned=*/false);
  case ::onnx::TensorProto::UINT64:
    return b.getIntegerType(64, /*isSigned=*/false);
  default:
    error(loc) << what << " has unsupported element type "
               << dataTypeName(dataType);
    return failure();
  }
}

FailureOr<Type> ModelImporter::valueType(const ::onnx::TypeProto &type,
                                         Location loc, StringRef what,
                                         bool requireStatic) {
  if (!type.has_tensor_type()) {
    error(loc) << what
               << " is not a tensor (sequences, maps and optionals are not "
                  "supported)";
    return failure();
  }
  const auto &tensorType = type.tensor_type();
  FailureOr<Type> elem = elementType(tensorType.elem_type(), loc, what);
  if (failed(elem))
    return failure();
  if (!tensorType.has_shape())
    return Type(UnrankedTensorType::get(*elem));
  SmallVector<int64_t> shape;
  for (const auto &dim : tensorType.shape().dim()) {
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    auto it = dim.has_dim_param() ? symbolSizes.find(dim.dim_param())
                                  : symbolSizes.end();
    if (it != symbolSizes.end()) {
      shape.push_back(it->second);
      continue;
    }
    if (requireStatic) {
      // A symbol is any text, of any length: keep the message one line.
      std::string sym;
      if (dim.has_dim_param()) {
        llvm::raw_string_ostream os(sym);
        os << " ('";
        llvm::printEscapedString(StringRef(dim.dim_param()).take_front(80), os);
        os << (dim.dim_param().size() > 80 ? "...')" : "')");
      }
      error(loc) << what << " has unbound dynamic "
                 << "dimension " << shape.size() << sym << "; bind it with "
                 << options.bindHint;
      return failure();
    }
    shape.push_back(ShapedType::kDynamic);
  }
  if (!nn::isWithinSizeLimit(shape)) {
    error(loc) << what << " has shape " << nn::describeShape(shape)
               << ", beyond the 2^48 elements ztc supports";
    return failure();
  }
  if (!nn::isWithinRankLimit(shape)) {
    error(loc) << what << " has shape " << nn::describeShape(shape)
               << ": ztc's kernels take at most " << nn::kMaxRank
               << " dimensions";
    return failure();
  }
  return Type(RankedTensorType::get(shape, *elem));
}

/// Binds the symbolic dimensions of graph inputs from `--input-shape`, so
/// that they also resolve wherever else the same symbol appears.
LogicalResult ModelImporter::bindInputShapes(const ::onnx::GraphProto &graph) {
  llvm::StringSet<> inputNames;
  for (const auto &input : graph.input())
    inputNames.insert(input.name());
  bool ok = true, sequenceBound = false;
  inputShapes = options.inputShapes;
  for (const auto &input : graph.input()) {
    // Constants (--constant-input) take their shape from their value.
    if (!options.shapeFor || inputShapes.count(input.name()) ||
        options.constantInputs.count(input.name()) ||
        !input.type().has_tensor_type())
      continue;
    const auto &shape = input.type().tensor_type().shape();
    bool dynamic = llvm::any_of(shape.dim(), [](const auto &dim) {
      return !dim.has_dim_value() || dim.dim_value() < 0;
    });
    if (!dynamic)
      continue;
    std::string why;
    if (auto found = options.shapeFor(input.name(), why)) {
      inputShapes[input.name()] = *found;
    } else if (!why.empty()) {
      error() << "input '" << input.name() << "': " << why;
      ok = false;
    }
  }
  // Old models list initializers among the inputs too.
  llvm::StringSet<> initializerNames;
  for (const auto &init : graph.initializer())
    initializerNames.insert(init.name());
  for (const auto &input : graph.input()) {
    // --input-shape wins for its input, but must agree on the batch.
    if (options.batchSize > 0 && inputShapes.count(input.name()) &&
        !initializerNames.contains(input.name())) {
      const SmallVector<int64_t> &given = inputShapes[input.name()];
      if (!given.empty() && given.front() != options.batchSize) {
        error() << "--input-shape gives input '" << input.name()
                << "' a first dimension of " << given.front()
                << ", but --batch-size is " << options.batchSize
                << "; give one, or make them agree";
        ok = false;
      }
      continue;
    }
    if (options.batchSize <= 0 || inputShapes.count(input.name()) ||
        !input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    const auto &dims = input.type().tensor_type().shape().dim();
    auto isStatic = [](const auto &dim) {
      return dim.has_dim_value() && dim.dim_value() >= 0;
    };
    if (!dims.empty() && isStatic(dims[0]) &&
        dims[0].dim_value() != options.batchSize &&
        !initializerNames.contains(input.name())) {
      // Every input's first dimension is the batch (the trainer slices
      // samples from it): a static one must agree.
      error() << "input '" << input.name() << "' has a static first dimension "
              << dims[0].dim_value() << ", but the batch size is "
              << options.batchSize << "; export the model with a dynamic "
              << "batch axis or compile with --batch-size "
              << dims[0].dim_value();
      ok = false;
      continue;
    }
    bool sequence =
        options.sequenceLength > 0 && dims.size() >= 2 && !isStatic(dims[1]);
    if (dims.empty() || isStatic(dims[0]) ||
        !std::all_of(dims.begin() + (sequence ? 2 : 1), dims.end(), isStatic))
      continue;
    SmallVector<int64_t> shape = {options.batchSize};
    for (int i = 1; i < dims.size(); ++i)
      shape.push_back(i == 1 && sequence ? options.sequenceLength
                                         : dims[i].dim_value());
    inputShapes[input.name()] = shape;
    sequenceBound |= sequence;
  }
  if (options.sequenceLength > 0 && !sequenceBound) {
    std::string inputs;
    for (const auto &input : graph.input())
      if (!initializerNames.contains(input.name()))
        inputs += (inputs.empty() ? "'" : ", '") + input.name() + "'";
    error() << "--seq-buckets binds the sequence: a dynamic second dimension "
               "of a graph input, which none of "
            << inputs
            << " has; export the model with a dynamic sequence axis "
               "(dynamic_axes={'input_ids': {0: 'batch', 1: 'sequence'}})";
    ok = false;
  }
  for (const auto &entry : inputShapes) {
    if (!inputNames.contains(entry.getKey())) {
      std::string known;
      for (const auto &input : graph.input())
        known += (known.empty() ? "'" : ", '") + input.name() + "'";
      error() << "--input-shape names '" << entry.getKey()
              << "', which is not a graph input (inputs: " << known << ")";
      ok = false;
    }
  }
  for (const auto &entry : options.constantInputs) {
    if (!inputNames.contains(entry.getKey())) {
      error() << "--constant-input names '" << entry.getKey()
              << "', which is not a graph input";
      ok = false;
    }
  }
  for (const auto &input : graph.input()) {
    auto it = inputShapes.find(input.name());
    if (it == inputShapes.end() || !input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    const auto &dims = input.type().tensor_type().shape().dim();
    ArrayRef<int64_t> bound = it->second;
    if (static_cast<size_t>(dims.size()) != bound.size()) {
      error() << "--input-shape gives input '" << input.name() << "' rank "
              << bound.size() << ", but the model declares rank "
              << dims.size();
      ok = false;
      continue;
    }
    for (auto [i, dim] : llvm::enumerate(dims)) {
      if (dim.has_dim_value() && dim.dim_value() > 0 &&
          dim.dim_value() != bound[i]) {
        error() << "--input-shape gives input '" << input.name() << "' size "
                << bound[i] << " in dimension " << i
                << ", but the model fixes it to " << dim.dim_value();
        ok = false;
      } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
        auto [slot, inserted] =
            symbolSizes.try_emplace(dim.dim_param(), bound[i]);
        if (!inserted && slot->second != bound[i]) {
          error() << "--input-shape binds dimension '" << dim.dim_param()
                  << "' to both " << slot->second << " and " << bound[i];
          ok = false;
        }
      }
    }
  }
  return success(ok);
}

/// Checks (and, when `readData`, reads) a tensor stored outside the model.
FailureOr<std::string>
ModelImporter::readExternal(const ::onnx::TensorProto &tensor,
                            size_t expectedBytes, bool readData, Location loc) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto &entry : tensor.external_data()) {
    uint64_t number = 0;
    if (entry.key() == "location") {
      location = entry.value();
    } else if ((entry.key() == "offset" || entry.key() == "length") &&
               StringRef(entry.value()).getAsInteger(10, number)) {
      error(loc) << "external data of initializer '" << tensor.name()
                 << "' has " << entry.key() << " '"
                 << StringRef(entry.value()).take_front(40)
                 << "', not a whole number of bytes";
      return failure();
    } else if (entry.key() == "offset") {
      offset = number;
    } else if (entry.key() == "length") {
      length = number;
    }
  }
  if (location.empty()) {
    error(loc) << "initializer '" << tensor.name()
               << "' is stored externally but names no location";
    return failure();
  }
  // Checked before any byte is read.
  std::string why;
  std::optional<std::string> confined =
      confinedExternalPath(baseDir, location, why);
  if (!confined) {
    if (why == "is missing")
      error(loc) << "external data file '" << location << "' of initializer '"
                 << tensor.name() << "' is missing";
    else
      error(loc) << "external data of initializer '" << tensor.name()
                 << "': location '" << StringRef(location).take_front(200)
                 << "' " << why
                 << "; ztc reads external data only from the model's "
                    "directory";
    return failure();
  }
  SmallString<256> path(*confined);
  uint64_t fileSize = 0;
  if (llvm::sys::fs::file_size(path, fileSize)) {
    error(loc) << "external data file '" << location << "' of initializer '"
               << tensor.name() << "' is missing";
    return failure();
  }
  uint64_t bytes = length.value_or(expectedBytes);
  if (bytes != expectedBytes || offset > fileSize ||
      bytes > fileSize - offset) {
    error(loc) << "external data of initializer '" << tensor.name() << "' ("
               << location << ", offset " << offset << ", " << bytes
               << " bytes) does not fit its shape (" << expectedBytes
               << " bytes) or the file (" << fileSize << " bytes)";
    return failure();
  }
  if (!readData)
    return std::string();
  auto buffer = llvm::MemoryBuffer::getFileSlice(path, bytes, offset);
  if (!buffer) {
    error(loc) << "cannot read external data file '" << location
               << "': " << buffer.getError().message();
    return failure();
  }
  return (*buffer)->getBuffer().str();
}

/// The little-endian bytes of an ONNX tensor, one byte per bool, from
/// raw_data, the typed fields or external data; `type` is its MLIR type.
FailureOr<std::string>
ModelImporter::tensorBytes(const ::onnx::TensorProto &tensor, Location loc,
                           RankedTensorType &type) {
  std::string what = "tensor '" + tensor.name() + "'";
  FailureOr<Type> elem = elementType(tensor.data_type(), loc, what);
  if (failed(elem))
    return failure();
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  type = RankedTensorType::get(shape, *elem);
  int64_t count = type.getNumElements();
  unsigned bytesPerElem = std::max(1u, elem->getIntOrFloatBitWidth() / 8);
  size_t expectedBytes = static_cast<size_t>(count) * bytesPerElem;

  std::string raw;
  if (tensor.data_location() == ::onnx::TensorProto::EXTERNAL) {
    FailureOr<std::string> data =
        readExternal(tensor, expectedBytes, /*readData=*/true, loc);
    if (failed(data))
      return failure();
    raw = std::move(*data);
  } else if (tensor.has_raw_data()) {
    raw = tensor.raw_data();
  } else {
    // Typed fields: widen/narrow into the little-endian raw layout.
    auto append = [&](auto value, unsigned width) {
      raw.append(reinterpret_cast<const char *>(&value), width);
    };
    switch (tensor.data_type()) {
    case ::onnx::TensorProto::FLOAT:
      for (float v : tensor.float_data())
        append(v, 4);
      break;
    case ::onnx::TensorProto::DOUBLE:
      for (double v : tensor.double_data())
        append(v, 8);
      break;
    case ::onnx::TensorProto::INT64:
      for (int64_t v : tensor.int64_data())
        append(v, 8);
      break;
    case ::onnx::TensorProto::UINT32:
    case ::onnx::TensorProto::UINT64:
      for (uint64_t v : tensor.uint64_data())
        append(v, bytesPerElem);
      break;
    default:
      // int32_data carries every narrower type, f16 and bf16 as bits.
      for (int32_t v : tensor.int32_data())
        append(v, bytesPerElem);
      break;
    }
  }
  if (raw.size() != expectedBytes) {
    error(loc) << what << " holds " << raw.size()
               << " bytes of data, but its shape and type need "
               << expectedBytes;
    return failure();
  }
  if (elem->isInteger(1))
    for (char &c : raw)
      c = c != 0;
  return raw;
}

/// Converts an ONNX tensor to a dense attribute (used for constants only:
/// weights never take this path).
FailureOr<ElementsAttr>
ModelImporter::tensorValue(const ::onnx::TensorProto &tensor, Location loc) {
  RankedTensorType type;
  FailureOr<std::string> raw = tensorBytes(tensor, loc, type);
  if (failed(raw))
    return failure();
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> bits(raw->begin(), raw->end());
    return ElementsAttr(DenseElementsAttr::get(type, bits));
  }
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(raw->data(), raw->size())));
}

/// Reads a `--constant-input` file: one serialized TensorProto.
FailureOr<::onnx::TensorProto>
ModelImporter::readTensorFile(StringRef path, StringRef inputName,
                              Location loc) {
  if (std::optional<std::string> why = notRegularFile(path)) {
    error(loc) << "--constant-input " << inputName << ": '" << path << "' "
               << *why;
    return failure();
  }
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  ::onnx::TensorProto tensor;
  if (!buffer) {
    error(loc) << "--constant-input " << inputName << ": cannot read '" << path
               << "': " << buffer.getError().message();
    return failure();
  }
  if (!tensor.ParseFromArray((*buffer)->getBufferStart(),
                             static_cast<int>((*buffer)->getBufferSize()))) {
    error(loc) << "--constant-input " << inputName << ": '" << path
               << "' is not a serialized ONNX TensorProto";
    return failure();
  }
  tensor.set_name(inputName.str());
  return tensor;
}

FailureOr<NamedAttribute>
ModelImporter::attribute(const ::onnx::AttributeProto &attr, Location loc) {
  Builder b(&context);
  auto named = [&](Attribute value) {
    return NamedAttribute(b.getStringAttr(attr.name()), value);
  };
  switch (attr.type()) {
  case ::onnx::AttributeProto::INT:
    return named(b.getI64IntegerAttr(attr.i()));
  case ::onnx::AttributeProto::FLOAT:
    return named(b.getF32FloatAttr(attr.f()));
  case ::onnx::AttributeProto::STRING:
    return named(b.getStringAttr(attr.s()));
  case ::onnx::AttributeProto::INTS: {
    SmallVector<int64_t> ints(attr.ints().begin(), attr.ints().end());
    return named(b.getI64ArrayAttr(ints));
  }
  case ::onnx::AttributeProto::FLOATS: {
    SmallVector<float> floats(attr.floats().begin(), attr.floats().end());
    return named(b.getF32ArrayAttr(floats));
  }
  case ::onnx::AttributeProto::STRINGS: {
    SmallVector<Attribute> strings;
    for (const auto &s : attr.strings())
      strings.push_back(b.getStringAttr(s));
    return named(b.getArrayAttr(strings));
  }
  case ::onnx::AttributeProto::TENSOR: {
    FailureOr<ElementsAttr> value = tensorValue(attr.t(), loc);
    if (failed(value))
      return failure();
    return named(*value);
  }
  default:
    // Subgraphs (If, Loop, Scan), sparse tensors and type protos are kept as
    // a marker; the conversion reports such nodes as unsupported.
    return named(b.getStringAttr(
        "<unsupported " +
        ::onnx::AttributeProto_AttributeType_Name(attr.type()) + ">"));
  }
}

LogicalResult ModelImporter::importNodes(const ::onnx::GraphProto &graph) {
  for (const auto &node : graph.node()) {
    Location loc = nodeLoc(node);
    auto nodeName = cast<NameLoc>(loc).getName().str();
    SmallVector<Value> inputs;
    for (const auto &name : node.input()) {
      if (name.empty()) {
        if (!noneValue) {
          // One marker at the top of the function serves every node.
          OpBuilder::InsertionGuard guard(builder);
          builder.setInsertionPointToStart(builder.getInsertionBlock());
          noneValue = NoneOp::create(builder, fileLoc);
        }
        inputs.push_back(noneValue);
        continue;
      }
      auto it = values.find(name);
      if (it == values.end()) {
        error(loc) << "node '" << nodeName << "' (" << node.op_type()
                   << "): input '" << name
                   << "' is not a graph input, an initializer or the output "
                      "of an earlier node";
        return failure();
      }
      inputs.push_back(it->second);
    }
    SmallVector<NamedAttribute> attrs;
    llvm::StringSet<> attrNames;
    for (const auto &attr : node.attribute()) {
      if (!attrNames.insert(attr.name()).second) {
        error(loc) << "node '" << nodeName << "' (" << node.op_type()
                   << "): attribute '" << attr.name() << "' is given twice";
        return failure();
      }
      FailureOr<NamedAttribute> named = attribute(attr, loc);
      if (failed(named))
        return failure();
      attrs.push_back(*named);
    }
    // Static single assignment, as ONNX's checker demands: a value is
    // written once, by a graph input, an initializer or one node.
    for (const auto &name : node.output())
      if (!name.empty() && values.count(name)) {
        error(loc) << "node '" << nodeName << "' (" << node.op_type()
                   << "): output '" << name
                   << "' is already a graph input, an initializer or an "
                      "earlier node's output (ONNX values are written once)";
        return failure();
      }
    SmallVector<Type> resultTypes;
    for (const auto &name : node.output()) {
      Type type = builder.getNoneType();
      auto it = declaredTypes.find(name);
      if (!name.empty() && it != declaredTypes.end()) {
        FailureOr<Type> declared =
            valueType(*it->second, loc, "value '" + name + "'",
                      /*requireStatic=*/false);
        if (succeeded(declared))
          type = *declared;
        else
          return failure();
      }
      resultTypes.push_back(type);
    }
    auto domainIt = opsets.find(node.domain());
    int64_t opset = domainIt != opsets.end()
                        ? domainIt->second
                        : (node.domain() == "ai.onnx" ? defaultOpset : 1);
    auto op =
        NodeOp::create(builder, loc, resultTypes, inputs, node.op_type(),
                       node.domain(), opset, builder.getDictionaryAttr(attrs));
    for (auto [name, result] : llvm::zip(node.output(), op.getResults()))
      if (!name.empty() && !values.try_emplace(name, result).second) {
        error(loc) << "node '" << nodeName << "' (" << node.op_type()
                   << "): output '" << name << "' is listed twice";
        return failure();
      }
  }
  return success();
}

FailureOr<std::optional<llvm::StringMap<InitializerEntry>>>
ModelImporter::readRoles(const ::onnx::ModelProto &model) {
  const std::string *text = nullptr;
  for (const auto &prop : model.metadata_props())
    if (prop.key() == kRolesKey)
      text = &prop.value();
  if (!text)
    return std::optional<llvm::StringMap<InitializerEntry>>();
  auto fail = [&](const Twine &why) {
    error() << "metadata '" << kRolesKey << "': " << why
            << " (python/ztc_export.py writes it; see docs/guide.md)";
    return failure();
  };
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(*text);
  if (!parsed)
    return fail("not JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    return fail("expected an object mapping initializer names to roles");
  llvm::StringMap<InitializerEntry> roles;
  for (const auto &[key, value] : *object) {
    std::string name = key.str();
    const llvm::json::Object *entry = value.getAsObject();
    std::optional<StringRef> role =
        entry ? entry->getString("role") : std::nullopt;
    InitializerEntry parsedEntry;
    if (role == "parameter")
      parsedEntry.role = InitializerRole::Parameter;
    else if (role == "buffer")
      parsedEntry.role = InitializerRole::Buffer;
    else if (role == "constant")
      parsedEntry.role = InitializerRole::Constant;
    else
      return fail("initializer '" + name +
                  "': expected {\"role\": \"parameter\", \"buffer\" or "
                  "\"constant\"}");
    if (const llvm::json::Value *tied = entry->get("tied")) {
      const llvm::json::Array *names = tied->getAsArray();
      if (!names || parsedEntry.role != InitializerRole::Parameter)
        return fail("initializer '" + name +
                    "': \"tied\" must be a list of names, on a parameter");
      for (const llvm::json::Value &other : *names) {
        std::optional<StringRef> otherName = other.getAsString();
        if (!otherName)
          return fail("initializer '" + name +
                      "': \"tied\" must be a list of names");
        parsedEntry.tied.push_back(otherName->str());
      }
    }
    roles[name] = std::move(parsedEntry);
  }
  return std::optional<llvm::StringMap<InitializerEntry>>(std::move(roles));
}

void ModelImporter::warnUnclassified(
    const ::onnx::ModelProto &model,
    const std::optional<llvm::StringMap<InitializerEntry>> &roles,
    ArrayRef<std::string> trained) {
  SmallVector<StringRef> unclassified;
  for (const std::string &name : trained) {
    bool stated = roles ? roles->count(name) != 0
                        : model.producer_name() != "pytorch" ||
                              StringRef(name).contains('.');
    if (!stated)
      unclassified.push_back(name);
  }
  if (unclassified.empty())
    return;
  InFlightDiagnostic warning = emitWarning(fileLoc);
  bool one = unclassified.size() == 1;
  if (roles)
    warning << unclassified.size() << " float initializer"
            << (one ? " has" : "s have") << " no role in its '" << kRolesKey
            << "' metadata and " << (one ? "is" : "are")
            << " trained as a parameter: ";
  else
    warning << "exported by PyTorch without initializer roles: "
            << unclassified.size() << " float initializer" << (one ? "" : "s")
            << " with generated names " << (one ? "is" : "are")
            << " trained, though such initializers may be buffers or "
               "constants the exporter derived (rotary tables, masks, "
               "transposed or merged weights): ";
  for (auto [i, name] : llvm::enumerate(unclassified)) {
    if (i == 5) {
      warning << " and " << unclassified.size() - 5 << " more";
      break;
    }
    warning << (i ? ", " : "") << "'" << name << "'";
  }
  if (!roles)
    warning << "; export with python/ztc_export.py (docs/guide.md, \"Export "
               "from PyTorch\"), or --freeze them";
}

OwningOpRef<ModuleOp> ModelImporter::import(const ::onnx::ModelProto &model) {
  context.loadDialect<OnnxDialect, func::FuncDialect, train::TrainDialect>();
  for (const auto &opset : model.opset_import()) {
    std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    if (opset.version() < 1) {
      // A domain is any bytes, of any length: keep the message one line.
      std::string escaped;
      llvm::raw_string_ostream os(escaped);
      llvm::printEscapedString(StringRef(opset.domain()).take_front(80), os);
      if (opset.domain().size() > 80)
        os << "...";
      error() << "opset_import gives domain '" << escaped << "' version "
              << opset.version() << "; versions start at 1";
      return nullptr;
    }
    opsets[domain] = opset.version();
  }
  if (!opsets.count("")) {
    if (model.ir_version() < 3 && model.opset_import_size() == 0) {
      opsets[""] = 1; // Pre-opset models imply opset 1.
    } else if (model.graph().node_size() == 0 && !model.has_graph()) {
      error() << "not an ONNX model (no graph)";
      return nullptr;
    }
  }
  defaultOpset = opsets.lookup("");
  if (defaultOpset > kMaxDefaultOpset) {
    error() << "unsupported opset version " << defaultOpset
            << " of the default ONNX domain (ztc supports up to "
            << kMaxDefaultOpset << ")";
    return nullptr;
  }
  const ::onnx::GraphProto &graph = model.graph();
  if (failed(bindInputShapes(graph)))
    return nullptr;
  for (const auto &info : graph.value_info())
    declaredTypes[info.name()] = &info.type();
  for (const auto &info : graph.output())
    declaredTypes[info.name()] = &info.type();

  Builder b(&context);
  // Owned until returned: every failure below destroys what was built.
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  (*module)->setAttr("onnx.source", b.getStringAttr(displayName));
  SmallVector<NamedAttribute> opsetAttrs;
  for (const auto &entry : opsets)
    opsetAttrs.push_back(
        b.getNamedAttr(entry.getKey().empty() ? "ai.onnx" : entry.getKey(),
                       b.getI64IntegerAttr(entry.getValue())));
  (*module)->setAttr("onnx.opsets", b.getDictionaryAttr(opsetAttrs));
  if (!model.producer_name().empty())
    (*module)->setAttr("onnx.producer",
                       b.getStringAttr(model.producer_name() + " " +
                                       model.producer_version()));

  // Arguments: graph inputs (those that are not initializers), then the float
  // initializers, which are the weights.
  llvm::StringMap<const ::onnx::TensorProto *> initializers;
  for (const auto &init : graph.initializer())
    initializers[init.name()] = &init;

  FailureOr<std::optional<llvm::StringMap<InitializerEntry>>> roles =
      readRoles(model);
  if (failed(roles))
    return nullptr;

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<train::BindingRole> argRoles;
  bool ok = true;
  SmallVector<::onnx::TensorProto> constantInputs;
  for (const auto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue;
    Location loc = NameLoc::get(b.getStringAttr(input.name()), fileLoc);
    auto constant = options.constantInputs.find(input.name());
    if (constant != options.constantInputs.end()) {
      FailureOr<::onnx::TensorProto> tensor =
          readTensorFile(constant->second, input.name(), loc);
      if (failed(tensor)) {
        ok = false;
        continue;
      }
      constantInputs.push_back(std::move(*tensor));
      continue;
    }
    FailureOr<Type> type =
        valueType(input.type(), loc, "input '" + input.name() + "'",
                  /*requireStatic=*/true);
    if (failed(type) || isa<UnrankedTensorType>(*type)) {
      if (succeeded(type))
        error(loc) << "input '" << input.name()
                   << "' has no declared shape; give it with --input-shape";
      ok = false;
      continue;
    }
    argTypes.push_back(*type);
    argNames.push_back(input.name());
    argRoles.push_back(train::BindingRole::Input);
  }
  SmallVector<const ::onnx::TensorProto *> constants;
  for (const auto &init : graph.initializer()) {
    Location loc = NameLoc::get(b.getStringAttr(init.name()), fileLoc);
    FailureOr<Type> elem =
        elementType(init.data_type(), loc, "initializer '" + init.name() + "'");
    if (failed(elem)) {
      ok = false;
      continue;
    }
    SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    if (!nn::isWithinSizeLimit(shape)) {
      error(loc) << "initializer '" << init.name() << "' has dims "
                 << nn::describeShape(shape)
                 << ": negative, or beyond the 2^48 elements ztc supports";
      ok = false;
      continue;
    }
    if (!nn::isWithinRankLimit(shape)) {
      error(loc) << "initializer '" << init.name() << "' has dims "
                 << nn::describeShape(shape) << ": ztc's kernels take at most "
                 << nn::kMaxRank << " dimensions";
      ok = false;
      continue;
    }
    auto type = RankedTensorType::get(shape, *elem);
    // Rank-0 floats are constants (a 1/sqrt(d) factor); anything with a
    // dimension, even of size 1 (the bias of a one-output Linear), is a
    // weight.
    // ztc_export's roles: constants fold into the step, buffers stay
    // fixed weights.
    const InitializerEntry *entry = nullptr;
    if (*roles) {
      auto found = (*roles)->find(init.name());
      if (found != (*roles)->end())
        entry = &found->second;
    }
    if (!isa<FloatType>(*elem) ||
        (type.getRank() == 0 &&
         type.getNumElements() <= options.maxConstantFloatElements) ||
        (entry && entry->role == InitializerRole::Constant)) {
      constants.push_back(&init);
      continue;
    }
    if (init.data_location() == ::onnx::TensorProto::EXTERNAL &&
        failed(readExternal(
            init, type.getNumElements() * (elem->getIntOrFloatBitWidth() / 8),
            /*readData=*/false, loc))) {
      ok = false;
      continue;
    }
    argTypes.push_back(type);
    argNames.push_back(init.name());
    argRoles.push_back(entry && entry->role == InitializerRole::Buffer
                           ? train::BindingRole::Buffer
                           : train::BindingRole::Param);
  }
  if (!ok)
    return nullptr;
  SmallVector<std::string> trained;
  for (auto [name, role] : llvm::zip(argNames, argRoles))
    if (role == train::BindingRole::Param)
      trained.push_back(name);
  warnUnclassified(model, *roles, trained);
  // Tied parameters' other state-dict names, for `ztc export
  // --state-dict`.
  if (*roles) {
    SmallVector<NamedAttribute> tiedAttrs;
    for (const std::string &name : trained) {
      auto found = (*roles)->find(name);
      if (found == (*roles)->end() || found->second.tied.empty())
        continue;
      SmallVector<Attribute> others;
      for (const std::string &other : found->second.tied)
        others.push_back(b.getStringAttr(other));
      tiedAttrs.push_back(b.getNamedAttr(name, b.getArrayAttr(others)));
    }
    if (!tiedAttrs.empty())
      (*module)->setAttr("onnx.tied", b.getDictionaryAttr(tiedAttrs));
  }

  SmallVector<Type> resultTypes;
  for (const auto &output : graph.output()) {
    Location loc = NameLoc::get(b.getStringAttr(output.name()), fileLoc);
    FailureOr<Type> type =
        output.has_type()
            ? valueType(output.type(), loc, "output '" + output.name() + "'",
                        /*requireStatic=*/false)
            : FailureOr<Type>(b.getNoneType());
    if (failed(type))
      return nullptr;
    resultTypes.push_back(*type);
  }

  builder.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(builder, fileLoc, "main",
                                   b.getFunctionType(argTypes, resultTypes));
  Block *entry = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    // Graph inputs are data; initializers the graph does not use as
    // constants are weights (ztc-autodiff decides which ones train).
    train::setBinding(func, i, name, argRoles[i]);
    values[name] = entry->getArgument(i);
  }
  builder.setInsertionPointToStart(entry);
  for (const ::onnx::TensorProto &tensor : constantInputs)
    constants.push_back(&tensor);
  for (const ::onnx::TensorProto *init : constants) {
    Location loc = NameLoc::get(b.getStringAttr(init->name()), fileLoc);
    FailureOr<ElementsAttr> value = tensorValue(*init, loc);
    if (failed(value))
      return nullptr;
    values[init->name()] = ConstantOp::create(builder, loc, *value);
  }
  if (failed(importNodes(graph)))
    return nullptr;

  SmallVector<Value> results;
  for (auto [i, output] : llvm::enumerate(graph.output())) {
    auto it = values.find(output.name());
    if (it == values.end()) {
      error() << "graph output '" << output.name()
              << "' is not produced by any node, input or initializer";
      return nullptr;
    }
    results.push_back(it->second);
    func.setResultAttr(i, "onnx.name", b.getStringAttr(output.name()));
  }
  // A declared output type that disagrees with its producer (e.g. a graph
  // input passed through) takes the producer's type.
  func.setType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  func::ReturnOp::create(builder, fileLoc, results);

  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace

llvm::Error mlir::ztc::onnx::parseInputShape(StringRef text,
                                             ImportOptions &options) {
  auto [name, dims] = text.split('=');
  if (name.empty() || !text.contains('='))
    return llvm::createStringError(
        "--input-shape expects NAME=D0xD1x... (e.g. x=8x64), got '" + text +
        "'");
  SmallVector<int64_t> shape;
  if (!dims.empty()) {
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef part : parts) {
      int64_t size;
      if (part.getAsInteger(10, size) || size < 0)
        return llvm::createStringError("--input-shape " + text + ": '" + part +
                                       "' is not a dimension size");
      shape.push_back(size);
    }
  }
  options.inputShapes[name] = std::move(shape);
  return llvm::Error::success();
}

llvm::Error mlir::ztc::onnx::parseConstantInput(StringRef text,
                                                ImportOptions &options) {
  auto [name, path] = text.split('=');
  if (name.empty() || path.empty())
    return llvm::createStringError(
        "--constant-input expects NAME=FILE.pb, got '" + text + "'");
  options.constantInputs[name] = path.str();
  return llvm::Error::success();
}

/// Parses a model given as bytes: the ONNX text format (its leading
/// `<ir_version: ..., opset_import: ...>` header, perhaps after `#` comment
/// lines) or a binary protobuf.
static LogicalResult parseModel(MLIRContext &context, StringRef bytes,
                                StringRef displayName,
                                ::onnx::ModelProto &model) {
  StringRef trimmed = bytes.ltrim();
  while (trimmed.starts_with("#"))
    trimmed = trimmed.split('\n').second.ltrim();
  if (trimmed.starts_with("<")) {
    TextParseError error;
    if (parseOnnxText(bytes.str(), model, error))
      return success();
    // One line with the position, and the offending line as a note.
    InFlightDiagnostic diag =
        emitError(FileLineColLoc::get(&context, displayName, error.line,
                                      error.column))
        << "cannot parse ONNX text";
    if (error.line)
      diag << " at line " << error.line << ", column " << error.column;
    diag << ": " << error.message;
    if (!error.excerpt.empty())
      diag.attachNote() << error.excerpt;
    return failure();
  }
  if (bytes.empty() ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
      !model.has_graph())
    return emitError(FileLineColLoc::get(&context, displayName, 0, 0))
           << "not a valid ONNX model (truncated, or not an ONNX file)";
  return success();
}

/// Reads the file at `path` for parsing.
static std::unique_ptr<llvm::MemoryBuffer> readModelFile(MLIRContext &context,
                                                         StringRef path) {
  if (std::optional<std::string> why = notRegularFile(path)) {
    emitError(FileLineColLoc::get(&context, path, 0, 0))
        << "cannot read: " << *why;
    return nullptr;
  }
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    emitError(FileLineColLoc::get(&context, path, 0, 0))
        << "cannot read: " << buffer.getError().message();
    return nullptr;
  }
  if (static_cast<uint64_t>((*buffer)->getBufferSize()) > INT32_MAX) {
    emitError(FileLineColLoc::get(&context, path, 0, 0))
        << "models over 2 GB must keep their weights as external data";
    return nullptr;
  }
  return std::move(*buffer);
}

OwningOpRef<ModuleOp>
mlir::ztc::onnx::importOnnxBytes(MLIRContext &context, StringRef bytes,
                                 StringRef displayName, StringRef baseDir,
                                 const ImportOptions &options) {
  ::onnx::ModelProto model;
  if (failed(parseModel(context, bytes, displayName, model)))
    return nullptr;
  ModelImporter importer(context, displayName, baseDir, options);
  return importer.import(model);
}

namespace {
/// Reads and parses the model file at `path`; diagnostics go to `context`.
LogicalResult parseModelFile(MLIRContext &context, StringRef path,
                             ::onnx::ModelProto &model) {
  std::unique_ptr<llvm::MemoryBuffer> buffer = readModelFile(context, path);
  return success(buffer && succeeded(parseModel(context, buffer->getBuffer(),
                                                path, model)));
}
} // namespace

LogicalResult mlir::ztc::onnx::readInitializers(
    MLIRContext &context, StringRef path,
    function_ref<LogicalResult(StringRef name, StringRef bytes)> fn) {
  ::onnx::ModelProto model;
  if (failed(parseModelFile(context, path, model)))
    return failure();
  ImportOptions options;
  ModelImporter importer(context, path, llvm::sys::path::parent_path(path),
                         options);
  for (const auto &init : model.graph().initializer()) {
    RankedTensorType type;
    Location loc =
        NameLoc::get(StringAttr::get(&context, init.name()), importer.fileLoc);
    FailureOr<std::string> bytes = importer.tensorBytes(init, loc, type);
    if (failed(bytes) || failed(fn(init.name(), *bytes)))
      return failure();
  }
  return success();
}

LogicalResult mlir::ztc::onnx::readTiedParameters(
    MLIRContext &context, StringRef path, bool &hasRoles,
    std::map<std::string, std::vector<std::string>> &tied) {
  ::onnx::ModelProto model;
  if (failed(parseModelFile(context, path, model)))
    return failure();
  ImportOptions options;
  ModelImporter importer(context, path, llvm::sys::path::parent_path(path),
                         options);
  FailureOr<std::optional<llvm::StringMap<InitializerEntry>>> roles =
      importer.readRoles(model);
  if (failed(roles))
    return failure();
  hasRoles = roles->has_value();
  if (hasRoles)
    for (const auto &entry : **roles)
      if (!entry.second.tied.empty())
        tied[entry.getKey().str()] = std::vector<std::string>(
            entry.second.tied.begin(), entry.second.tied.end());
  return success();
}

FailureOr<std::vector<std::string>>
mlir::ztc::onnx::externalDataFiles(MLIRContext &context, StringRef path) {
  std::unique_ptr<llvm::MemoryBuffer> buffer = readModelFile(context, path);
  ::onnx::ModelProto model;
  if (!buffer || failed(parseModel(context, buffer->getBuffer(), path, model)))
    return failure();
  std::vector<std::string> files;
  for (const auto &init : model.graph().initializer()) {
    if (init.data_location() != ::onnx::TensorProto::EXTERNAL)
      continue;
    for (const auto &entry : init.external_data()) {
      if (entry.key() != "location")
        continue;
      // Only files the import may read: it refuses the others.
      std::string why;
      std::optional<std::string> file = confinedExternalPath(
          llvm::sys::path::parent_path(path), entry.value(), why);
      if (file && !llvm::is_contained(files, *file))
        files.push_back(*file);
    }
  }
  return files;
}

OwningOpRef<ModuleOp>
mlir::ztc::onnx::importOnnxFile(MLIRContext &context, StringRef path,
                                const ImportOptions &options) {
  std::unique_ptr<llvm::MemoryBuffer> buffer = readModelFile(context, path);
  if (!buffer)
    return nullptr;
  return importOnnxBytes(context, buffer->getBuffer(), path,
                         llvm::sys::path::parent_path(path), options);
}

/// Switches the graph's training-mode BatchNormalization and Dropout nodes
/// to inference (see writeModelWithInitializers).
static LogicalResult switchToInference(MLIRContext &context, StringRef path,
                                       ::onnx::GraphProto &graph,
                                       ExportSummary &summary) {
  llvm::StringSet<> read, dropped;
  for (const ::onnx::NodeProto &node : graph.node())
    for (const std::string &input : node.input())
      read.insert(input);
  for (const ::onnx::ValueInfoProto &output : graph.output())
    read.insert(output.name());
  for (::onnx::NodeProto &node : *graph.mutable_node()) {
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    if (!defaultDomain)
      continue;
    if (node.op_type() == "BatchNormalization") {
      bool training = node.output_size() > 1;
      for (::onnx::AttributeProto &attr : *node.mutable_attribute())
        if (attr.name() == "training_mode" && attr.i() != 0) {
          training = true;
          attr.set_i(0);
        }
      for (int i = 1; i < node.output_size(); ++i)
        if (!node.output(i).empty() && read.contains(node.output(i)))
          return emitError(FileLineColLoc::get(&context, path, 0, 0))
                 << "node '" << node.name()
                 << "' (BatchNormalization): its statistics output '"
                 << node.output(i)
                 << "' is read, so it cannot switch to inference";
      if (node.output_size() > 1)
        node.mutable_output()->DeleteSubrange(1, node.output_size() - 1);
      summary.batchNorms += training;
    } else if (node.op_type() == "Dropout" && node.input_size() > 2) {
      // Without the training_mode input, Dropout is the identity.
      dropped.insert(node.input(2));
      node.mutable_input()->DeleteSubrange(2, node.input_size() - 2);
      ++summary.dropouts;
    }
  }
  // The training_mode values nothing reads any more go too.
  read.clear();
  for (const ::onnx::NodeProto &node : graph.node())
    for (const std::string &input : node.input())
      read.insert(input);
  for (const ::onnx::ValueInfoProto &output : graph.output())
    read.insert(output.name());
  auto unused = [&](const std::string &name) {
    return dropped.contains(name) && !read.contains(name);
  };
  auto *nodes = graph.mutable_node();
  nodes->erase(std::remove_if(nodes->begin(), nodes->end(),
                              [&](const ::onnx::NodeProto &node) {
                                return node.op_type() == "Constant" &&
                                       node.output_size() == 1 &&
                                       unused(node.output(0));
                              }),
               nodes->end());
  auto *inits = graph.mutable_initializer();
  inits->erase(std::remove_if(inits->begin(), inits->end(),
                              [&](const ::onnx::TensorProto &init) {
                                return unused(init.name());
                              }),
               inits->end());
  return success();
}

LogicalResult mlir::ztc::onnx::writeModelWithInitializers(
    MLIRContext &context, StringRef path, StringRef outputPath,
    const std::map<std::string, std::vector<uint8_t>> &values, bool inference,
    ExportSummary *summary) {
  std::unique_ptr<llvm::MemoryBuffer> buffer = readModelFile(context, path);
  ::onnx::ModelProto model;
  if (!buffer || failed(parseModel(context, buffer->getBuffer(), path, model)))
    return failure();
  ExportSummary changes;
  if (inference &&
      failed(switchToInference(context, path, *model.mutable_graph(), changes)))
    return failure();
  if (summary)
    *summary = changes;
  Location loc = FileLineColLoc::get(&context, outputPath, 0, 0);
  uint64_t total = 0;
  for (const auto &entry : values)
    total += entry.second.size();
  // Protobuf messages stop at 2 GB: larger models keep weights outside.
  bool external = total > (uint64_t(1) << 30);
  std::string dataName = llvm::sys::path::filename(outputPath).str() + ".data";
  std::string dataPath = outputPath.str() + ".data";
  std::string dataTemp = dataPath + ".tmp";
  std::error_code ec;
  std::unique_ptr<llvm::raw_fd_ostream> data;
  if (external) {
    data = std::make_unique<llvm::raw_fd_ostream>(dataTemp, ec);
    if (ec)
      return emitError(loc)
             << "cannot write " << dataTemp << ": " << ec.message();
  }
  uint64_t offset = 0;
  size_t replaced = 0;
  for (auto &init : *model.mutable_graph()->mutable_initializer()) {
    auto it = values.find(init.name());
    if (it == values.end())
      continue;
    ++replaced;
    const std::vector<uint8_t> &bytes = it->second;
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.clear_uint64_data();
    init.clear_raw_data();
    init.clear_external_data();
    if (!external) {
      init.set_data_location(::onnx::TensorProto::DEFAULT);
      init.set_raw_data(bytes.data(), bytes.size());
      continue;
    }
    init.set_data_location(::onnx::TensorProto::EXTERNAL);
    auto add = [&](const char *key, const std::string &value) {
      auto *entry = init.add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    add("location", dataName);
    add("offset", std::to_string(offset));
    add("length", std::to_string(bytes.size()));
    data->write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    offset += bytes.size();
  }
  if (replaced != values.size())
    return emitError(loc) << "the checkpoint has " << values.size()
                          << " tensors but only " << replaced
                          << " match initializers of " << path;
  // A stream that failed (a full disk) is closed, its error taken (an
  // unchecked one aborts the process) and its temporary file removed.
  auto failedStream = [&](llvm::raw_fd_ostream &stream,
                          StringRef file) -> std::optional<std::string> {
    stream.close();
    if (!stream.has_error())
      return std::nullopt;
    std::string reason = stream.error().message();
    stream.clear_error();
    llvm::sys::fs::remove(file);
    return reason;
  };
  if (data) {
    if (std::optional<std::string> reason = failedStream(*data, dataTemp))
      return emitError(loc) << "cannot write " << dataPath << ": " << *reason
                            << " (nothing written)";
    if ((ec = llvm::sys::fs::rename(dataTemp, dataPath))) {
      llvm::sys::fs::remove(dataTemp);
      return emitError(loc)
             << "cannot write " << dataPath << ": " << ec.message();
    }
  }
  std::string temp = outputPath.str() + ".tmp";
  {
    llvm::raw_fd_ostream out(temp, ec);
    if (ec)
      return emitError(loc) << "cannot write " << temp << ": " << ec.message();
    std::string bytes;
    if (!model.SerializeToString(&bytes)) {
      out.close();
      llvm::sys::fs::remove(temp);
      return emitError(loc) << "cannot serialize the model";
    }
    out << bytes;
    if (std::optional<std::string> reason = failedStream(out, temp))
      return emitError(loc) << "cannot write " << outputPath << ": " << *reason
                            << " (nothing written)";
  }
  if ((ec = llvm::sys::fs::rename(temp, outputPath))) {
    llvm::sys::fs::remove(temp);
    return emitError(loc) << "cannot write " << outputPath << ": "
                          << ec.message();
  }
  return success();
}
