# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: how the sanitizer
# build's processes run. A caller's own *SAN_OPTIONS come first.
#
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons and unpoisons its
# slabs by hand, but only in code compiled with ASan. Debian's MLIR
# libraries are not, so their copy of the allocator never unpoisons what
# ours poisoned, and every MLIRContext would report a false
# use-after-poison. ASan's own checks (heap, stack, globals) stay on.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allow_user_poisoning=0:detect_leaks=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1"
