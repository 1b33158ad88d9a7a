// The calling thread's V8 heap mode (heapMode.cc), exported by the addon next to the relay.
#pragma once

#include <node_api.h>

// memorySaving(on) -> undefined: V8's memory-saving mode on or off for the calling thread's isolate.
napi_value MemorySaving(napi_env env, napi_callback_info info);

// collectGarbage() -> undefined: a memory-reducing full collection of the calling thread's heap, now.
napi_value CollectGarbage(napi_env env, napi_callback_info info);
