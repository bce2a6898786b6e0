#!/usr/bin/env python3
"""How compile time grows with graph depth: import and lowering, side by side.

Two families of models, each at several depths:
  - chains of N elementwise Add nodes (the ONNX text format), lowered with
    the forward pipeline (`ztc-opt --ztc-forward-pipeline`);
  - the example GPT (examples/onnx/make_gpt.py) with L transformer blocks,
    compiled with the whole training pipeline
    (`ztc-opt --ztc-training-pipeline`).
For each depth it prints the import time, the lowering time and the lowering
time per node, and for each family the ratio of the deepest model's time
per node to the shallowest's: about 1 when lowering is linear in depth,
about the depth ratio when it is quadratic. Times are the best of --repeat
runs, measured in this one run.

    .venv/bin/python bench/compile_scaling.py [--build build] [--repeat 3]
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def best_time(command, repeat):
    """The fastest of `repeat` runs of `command`, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def write_chain(path, nodes):
    lines = ['<ir_version: 8, opset_import: ["" : 17]>',
             "g (float[64] x) => (float[64] y) {"]
    previous = "x"
    for i in range(nodes):
        out = "y" if i == nodes - 1 else "t%d" % i
        lines.append("  %s = Add(%s, x)" % (out, previous))
        previous = out
    lines.append("}")
    path.write_text("\n".join(lines) + "\n")


def count_nodes(ztc, model, shape_args):
    """ONNX nodes in the imported module (onnx.node ops)."""
    text = subprocess.run([ztc, "import", model, "--emit", "onnx"] + shape_args,
                          check=True, capture_output=True, text=True).stdout
    return text.count("onnx.node")


def measure(ztc, ztc_opt, model, shape_args, pipeline, work, repeat):
    imported = work / (pathlib.Path(model).stem + ".onnx.mlir")
    subprocess.run([ztc, "import", model, "--emit", "onnx", "-o", str(imported)]
                   + shape_args, check=True)
    import_s = best_time([ztc, "import", model, "--emit", "onnx", "-o",
                          str(imported)] + shape_args, repeat)
    lower_s = best_time([ztc_opt, str(imported), pipeline, "-o", "/dev/null"],
                        repeat)
    return import_s, lower_s, count_nodes(ztc, model, shape_args)


def report(title, rows):
    print(title)
    print("  %-8s %8s %12s %12s %16s" % ("depth", "nodes", "import s",
                                         "lowering s", "lowering us/node"))
    for depth, (import_s, lower_s, nodes) in rows:
        print("  %-8d %8d %12.3f %12.3f %16.1f" % (
            depth, nodes, import_s, lower_s, 1e6 * lower_s / nodes))
    (_, (_, first_s, first_n)), (_, (_, last_s, last_n)) = rows[0], rows[-1]
    ratio = (last_s / last_n) / (first_s / first_n)
    print("  time per node, deepest / shallowest: %.2f (depth ratio %.0f)"
          % (ratio, last_n / first_n))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chains", default="1000,5000,10000,20000")
    parser.add_argument("--layers", default="2,4,8,16")
    args = parser.parse_args()
    ztc = str(pathlib.Path(args.build) / "bin" / "ztc")
    ztc_opt = str(pathlib.Path(args.build) / "bin" / "ztc-opt")

    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        rows = []
        for depth in [int(d) for d in args.chains.split(",")]:
            model = work / ("chain%d.onnxtxt" % depth)
            write_chain(model, depth)
            rows.append((depth, measure(ztc, ztc_opt, str(model), [],
                                        "--ztc-forward-pipeline", work,
                                        args.repeat)))
        report("Chains of Add nodes (forward pipeline)", rows)

        rows = []
        for layers in [int(l) for l in args.layers.split(",")]:
            out = work / ("gpt%d" % layers)
            subprocess.run([sys.executable, str(ROOT / "examples/onnx/make_gpt.py"),
                            "--out", str(out), "--quiet", "--layers", str(layers),
                            "--name", "gpt%d" % layers], check=True)
            model = str(out / ("gpt%d.onnx" % layers))
            rows.append((layers, measure(
                ztc, ztc_opt, model, ["--input-shape", "tokens=4x16"],
                "--ztc-training-pipeline=loss=cross_entropy", work,
                args.repeat)))
        report("GPT blocks (training pipeline)", rows)


if __name__ == "__main__":
    main()
