# lit configuration for ztc: IR behaviour of dialects and passes, the ONNX
# importer on inline text models, and the driver's diagnostics.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "ztc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ztc_obj_root, "lit")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["ztc", "ztc-opt", "ztc-translate", "ztc-train"], [config.ztc_tools_dir])

# Binary ONNX files are made from text by a small script on the project's
# Python environment (scripts/setup.sh creates it).
python = os.path.join(config.ztc_source_dir, ".venv", "bin", "python")
config.substitutions.append(
    ("%onnx-tool",
     python + " " + os.path.join(config.test_source_root, "Inputs", "onnx_tool.py")))
config.substitutions.append(("%venv-python", python))

# FileCheck variables live from one CHECK-LABEL to the next (a capture in
# one function's checks cannot satisfy another's by accident).
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
