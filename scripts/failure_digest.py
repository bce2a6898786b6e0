#!/usr/bin/env python3
"""After a failed ctest run: each failed test's failing lines and the end of
its output, printed last, so that a log cut in the middle (CI keeps its head
and its tail) still shows why.

Reads BUILD/Testing/Temporary/LastTest.log, which ctest writes with every
test's whole output, and LastTestsFailed.log, which names the failed ones.

Usage: failure_digest.py BUILD_DIR
"""

import os
import re
import sys

# Lines that say what failed: the checks' FAIL lines, Python's exceptions,
# GoogleTest's failures, the sanitizers' reports, a command that failed.
MARKERS = re.compile(r"^(FAIL\b|Traceback|\S*Error\b|.*: error:|\[  FAILED  \]|"
                     r"==\d+==ERROR|.*runtime error:|command failed)")
TAIL = 25
MARKED = 20


def tests(log):
    """(name, output lines) for each test section of LastTest.log."""
    for section in re.split(r"\n(?=\d+/\d+ Testing: )", log):
        name = re.match(r"\d+/\d+ Testing: (.*)", section)
        output = re.search(r"\nOutput:\n-+\n(.*?)<end of output>", section, re.S)
        if name and output:
            yield name.group(1).strip(), output.group(1).splitlines()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    temporary = os.path.join(sys.argv[1], "Testing", "Temporary")
    try:
        with open(os.path.join(temporary, "LastTest.log"), errors="replace") as f:
            log = f.read()
        # "19:zero-end-to-end": the tests that failed (not those skipped).
        with open(os.path.join(temporary, "LastTestsFailed.log")) as f:
            names = {line.strip().split(":", 1)[-1] for line in f if line.strip()}
    except OSError as error:
        sys.exit("failure_digest.py: %s" % error)
    failed = [(name, lines) for name, lines in tests(log) if name in names]
    print("=" * 72)
    print("failed tests: %d (%s)" % (len(failed), ", ".join(n for n, _ in failed)))
    for name, lines in failed:
        marked = [line for line in lines if MARKERS.match(line)]
        print("-" * 72)
        print("%s: %d line(s) of output" % (name, len(lines)))
        if marked:
            print("  failing lines:")
            for line in marked[:MARKED]:
                print("    " + line[:300])
            if len(marked) > MARKED:
                print("    ... and %d more" % (len(marked) - MARKED))
        print("  the last %d lines:" % min(TAIL, len(lines)))
        for line in lines[-TAIL:]:
            print("    " + line[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
