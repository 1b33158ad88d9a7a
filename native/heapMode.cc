// V8's memory-saving mode for the calling thread, which Portal turns on while a handshake flood lasts
// (src/services/runtime/floodMemory.ts).
//
// Why: in this mode V8 makes its full collections memory-reducing ones (compacting, giving back emptied pages), so
// each thread's heap stays closer to what it holds alive. The mode is V8's "isolate in the background" notification,
// the one a browser gives a hidden tab: it trades some speed for memory, which is why Portal asks for it only while
// flooded.
//
// N-API has no call for this, so this file uses V8's own API; the addon is built against the running Node.

#include "heapMode.h"

#include <v8.h>

napi_value MemorySaving(napi_env env, napi_callback_info info) {
  napi_value args[1];
  size_t argc = 1;
  napi_get_cb_info(env, info, &argc, args, nullptr, nullptr);
  bool on = false;
  if (argc < 1 || napi_get_value_bool(env, args[0], &on) != napi_ok) {
    napi_throw_type_error(env, nullptr, "expected (on), a boolean");
    return nullptr;
  }
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate != nullptr) {
    if (on) {
      isolate->IsolateInBackgroundNotification();
    } else {
      isolate->IsolateInForegroundNotification();
    }
  }
  return nullptr;
}

// While flooded, the memory-saving mode alone still lets each heap grow by V8's own steps between full collections,
// and with two workers those steps came to more than the flood's memory bound: Portal asks for a collection itself
// once a heap has grown a few MiB (floodMemory.ts). Critical memory pressure is the embedder's way to ask for one: on
// the isolate's own thread V8 collects at once, memory-reducing (compacting, giving back emptied pages).
napi_value CollectGarbage(napi_env env, napi_callback_info info) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate != nullptr) isolate->MemoryPressureNotification(v8::MemoryPressureLevel::kCritical);
  return nullptr;
}
