//===- ErrorHooks.cpp - a step's kernel-library error hooks ---------------===//
//
// Kernels cannot throw: the CPU and CUDA libraries record the first data or
// device error of a step and export C functions to read and clear it. The
// backends find those functions in the step's shared object here.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"

#include <string>

#include <dlfcn.h>

using namespace ztc::rt;

ErrorHooks ztc::rt::findErrorHooks(EntryFn entry, const char *library) {
  ErrorHooks hooks;
  Dl_info info;
  if (!::dladdr(reinterpret_cast<void *>(entry), &info) || !info.dli_fname)
    return hooks;
  // Already loaded by the Artifact: RTLD_NOLOAD only takes a reference.
  void *handle = ::dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (!handle)
    return hooks;
  std::string prefix = std::string("ztc_") + library;
  auto lastError = reinterpret_cast<const char *(*)()>(
      ::dlsym(handle, (prefix + "_last_error").c_str()));
  auto clearError = reinterpret_cast<void (*)()>(
      ::dlsym(handle, (prefix + "_clear_error").c_str()));
  ::dlclose(handle);
  if (lastError && clearError) {
    hooks.lastError = lastError;
    hooks.clearError = clearError;
  }
  return hooks;
}
