#!/usr/bin/env python3
"""Runs the shell commands of a Markdown guide, so that the guide cannot go stale.

Usage: run_guide.py GUIDE WORKDIR --source REPO --tool BIN/ztc

Every ```sh block must follow a marker comment (blank lines may come between):

  <!-- tested -->          the block runs with `bash -e -o pipefail` and must exit 0
  <!-- tested: fails -->   the block must exit non-zero
  <!-- untested: WHY -->   the block is shown only (a slow set-up, a cluster)

`<!-- tested: file PATH -->` before any fenced block writes its text to PATH,
as the prose tells the reader to. A ```text block right after a tested ```sh
block is the output the reader sees: each of its lines must match a line of
the block's output (stdout and stderr together), in order; `...` inside a
line matches any text, and a line of just `...` stands for lines left out.

WORKDIR stands in for the repository root: it gets links to the source's
`examples`, `test`, `tools` and `.venv`, and `build/bin` links to the directory of the tool
given, which also comes first on PATH. Each block runs in WORKDIR in a shell
of its own, in the guide's order; the first failure stops the run and names
the block's line.
"""

import argparse
import os
import re
import subprocess
import sys
import time

MARKER = re.compile(r"^<!--\s*(tested|untested)\s*(?::\s*(.*?))?\s*-->$")
FENCE = re.compile(r"^```\s*([A-Za-z0-9_+-]*)\s*$")


class Block:
    def __init__(self, line, lang, text, marker, argument):
        self.line, self.lang, self.text = line, lang, text
        self.marker, self.argument = marker, argument
        self.expected = None  # the ```text block that follows, if any


def parse(path):
    """Returns the fenced blocks with their markers; fails on a marker that
    applies to nothing, an unknown marker, or an unmarked ```sh block."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, pending, after_block = [], None, None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        marker = MARKER.match(stripped)
        fence = FENCE.match(stripped)
        if marker:
            if pending:
                fail(path, pending[2], "marker applies to no fenced block")
            pending = (marker.group(1), marker.group(2) or "", i + 1)
            after_block = None
        elif fence:
            lang, start = fence.group(1), i + 1
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                fail(path, start, "unclosed fence")
            kind, argument, _ = pending or (None, "", 0)
            block = Block(start, lang, "\n".join(body) + "\n", kind, argument)
            if lang == "text" and after_block is not None and kind is None:
                after_block.expected = block
            elif lang == "sh" and kind is None:
                fail(path, start, "```sh block without <!-- tested --> or "
                     "<!-- untested: WHY -->")
            blocks.append(block)
            pending = None
            after_block = block if (lang == "sh" and kind == "tested") else None
        elif stripped:
            if pending:
                fail(path, pending[2], "marker applies to no fenced block")
            after_block = None
        i += 1
    if pending:
        fail(path, pending[2], "marker applies to no fenced block")
    return blocks


def fail(guide, line, message, output=None):
    print("%s:%d: error: %s" % (guide, line, message), file=sys.stderr)
    if output is not None:
        print("--- output ---\n%s--- end ---" % output, file=sys.stderr)
    sys.exit(1)


def check_output(guide, block, output):
    """Each expected line matches an output line, in order."""
    got = [l.rstrip() for l in output.split("\n")]
    at = 0
    for number, want in enumerate(block.expected.text.rstrip("\n").split("\n")):
        want = want.rstrip()
        if want in ("", "..."):
            continue
        pattern = re.compile(".*".join(re.escape(p) for p in want.split("...")))
        while at < len(got) and not pattern.fullmatch(got[at]):
            at += 1
        if at == len(got):
            fail(guide, block.expected.line + 1 + number,
                 "the output of the block at line %d has no line '%s' (in order)"
                 % (block.line, want), output)
        at += 1


def set_up(workdir, source, bindir):
    os.makedirs(os.path.join(workdir, "build"), exist_ok=True)
    links = {"examples": os.path.join(source, "examples"),
             "test": os.path.join(source, "test"),
             "tools": os.path.join(source, "tools"),
             ".venv": os.path.join(source, ".venv"),
             os.path.join("build", "bin"): bindir}
    for name, target in links.items():
        link = os.path.join(workdir, name)
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(target), link)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("guide")
    parser.add_argument("workdir")
    parser.add_argument("--source", required=True, help="the repository root")
    parser.add_argument("--tool", required=True, help="the built ztc; its directory goes on PATH")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per block")
    args = parser.parse_args()

    guide = os.path.relpath(args.guide, args.source) if os.path.isabs(args.guide) else args.guide
    guide = os.path.normpath(guide)
    blocks = parse(args.guide)
    bindir = os.path.dirname(os.path.abspath(args.tool))
    set_up(args.workdir, args.source, bindir)
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    # Light on a small machine: one thread per process (mpirun's ranks too).
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")

    ran = checked = files = untested = 0
    started = time.time()
    for block in blocks:
        if block.marker == "untested":
            untested += block.lang == "sh"
            continue
        if block.marker != "tested":
            continue
        if block.argument.startswith("file "):
            path = os.path.join(args.workdir, block.argument[len("file "):].strip())
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(block.text)
            files += 1
            continue
        if block.lang != "sh":
            fail(guide, block.line, "<!-- tested --> on a ```%s block" % block.lang)
        if block.argument not in ("", "fails"):
            fail(guide, block.line, "unknown marker 'tested: %s'" % block.argument)
        began = time.time()
        # In the sanitizer build, Open MPI's own allocations at exit are not
        # ours to suppress (test/CMakeLists.txt keeps zero-end-to-end out of
        # that build for the same reason): no leak check under mpirun.
        block_env = env
        if "mpirun" in block.text:
            block_env = dict(env)
            block_env["ASAN_OPTIONS"] = ":".join(
                filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
        try:
            result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text],
                                    cwd=args.workdir, env=block_env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True,
                                    timeout=args.timeout)
        except subprocess.TimeoutExpired as e:
            fail(guide, block.line, "timed out after %d s" % args.timeout,
                 e.output if isinstance(e.output, str) else "")
        output = result.stdout
        if block.argument == "fails" and result.returncode == 0:
            fail(guide, block.line, "the block should fail but exited 0", output)
        if block.argument != "fails" and result.returncode != 0:
            fail(guide, block.line, "the block exited %d" % result.returncode, output)
        if block.expected is not None:
            check_output(guide, block, output)
            checked += 1
        ran += 1
        print("%s:%d: ok (%.1f s)" % (guide, block.line, time.time() - began))
    if ran == 0:
        fail(guide, 1, "no tested blocks")
    print("%s: %d blocks passed (%d outputs checked, %d files written, %d untested) in %.0f s"
          % (guide, ran, checked, files, untested, time.time() - started))


if __name__ == "__main__":
    main()
