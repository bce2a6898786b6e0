"""Checks that a generated CUDA step can be captured as a CUDA graph.

For each entry of step.cu (`extern "C" void ztc_<name>(const
ztc_step_context *ctx) {` to the closing brace at column 0) it checks what
the runtime's graph capture (runtime/backend/CudaBackend.cpp) relies on,
and prints one line per entry:

  ztc_train_step: capturable, streams 0-1, 3 forks joined into stream 0

- no host wait and nothing a capture refuses: no synchronization, query,
  blocking copy or set, allocation outside the stream, or memory query;
- no mutable static state: a replay runs none of the entry's host code, so
  anything that changes per call must be in device memory;
- every stream other than 0 ends with an event that stream 0 waits for
  afterwards (a capture ends on stream 0, and every forked stream must be
  joined into it);
- the entry ends on stream 0.

Exits 1 naming the first violation.
"""

import re
import sys

# Calls that make the host wait, that a capture refuses, or that read the
# device from the host.
FORBIDDEN = re.compile(
    r"\b(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize"
    r"|cudaStreamQuery|cudaEventQuery|cudaMemcpy|cudaMemcpy2D|cudaMemset"
    r"|cudaMemcpyToSymbol|cudaMemcpyFromSymbol|cudaMemGetInfo|cudaMalloc"
    r"|cudaMallocHost|cudaHostAlloc|cudaFree|cudaFreeHost"
    r"|cudaDeviceSetLimit|cudaStreamCreate|cudaEventCreate)\s*\(")
MUTABLE_STATIC = re.compile(r"^\s*static\s+(?!const\b|constexpr\b)")
ENTRY = re.compile(r'^extern "C" (?:\w+ )*void (ztc_\w+)\(const ztc_step_context \*ctx\) \{$')
SWITCH = re.compile(r"stream = static_cast<cudaStream_t>\(ctx->streams\[(\d+)\]\);")
RECORD = re.compile(r"cudaEventRecord\(static_cast<cudaEvent_t>\(ctx->events\[(\d+)\]\), stream\);")
WAIT = re.compile(r"cudaStreamWaitEvent\(stream, static_cast<cudaEvent_t>\(ctx->events\[(\d+)\]\), 0\);")


def fail(entry, number, why):
    sys.exit(f"{entry}: line {number}: {why}")


def check_entry(name, lines):
    stream = 0
    streams = {0}
    # Per stream other than 0: the event recorded after its last work, or
    # None while it has work not followed by a record.
    last_record = {}
    joined = set()
    waited_on_zero = {}
    for number, line in lines:
        if FORBIDDEN.search(line):
            fail(name, number, "a host wait or a call a capture refuses: " + line.strip())
        if MUTABLE_STATIC.search(line):
            fail(name, number, "mutable static state, which a replay does not update: " + line.strip())
        if (match := SWITCH.search(line)):
            stream = int(match.group(1))
            streams.add(stream)
            continue
        if (match := RECORD.search(line)):
            if stream != 0:
                last_record[stream] = int(match.group(1))
            continue
        if (match := WAIT.search(line)):
            if stream == 0:
                waited_on_zero[int(match.group(1))] = number
            continue
        if stream != 0 and line.strip() and not line.strip().startswith("//"):
            last_record[stream] = None
    if stream != 0:
        fail(name, lines[-1][0], f"the entry ends on stream {stream}, not 0")
    for other, event in sorted(last_record.items()):
        if event is None:
            fail(name, lines[-1][0], f"stream {other} has work after its last event")
        if event not in waited_on_zero:
            fail(name, lines[-1][0],
                 f"stream 0 never waits for stream {other}'s last event {event}")
        joined.add(other)
    order = "-".join(str(s) for s in (min(streams), max(streams)))
    print(f"{name}: capturable, streams {order}, "
          f"{len(joined)} stream(s) joined into stream 0")


def main():
    with open(sys.argv[1]) as source:
        text = source.read().splitlines()
    entries = 0
    index = 0
    while index < len(text):
        match = ENTRY.match(text[index])
        if not match:
            index += 1
            continue
        name = match.group(1)
        body = []
        index += 1
        while index < len(text) and text[index] != "}":
            body.append((index + 1, text[index]))
            index += 1
        check_entry(name, body)
        entries += 1
    if entries == 0:
        sys.exit("no entry found")


if __name__ == "__main__":
    main()
