"""Prints 'same' when two artifacts compiled with --no-build are the same
compile: manifest, memory plan and generated step source byte for byte;
otherwise the files that differ."""
import pathlib
import sys

a, b = (pathlib.Path(p) for p in sys.argv[1:3])
differ = [name for name in ("manifest.json", "memory.json", "step.cpp")
          if (a / name).read_bytes() != (b / name).read_bytes()]
print("same" if not differ else "differ: " + " ".join(differ))
