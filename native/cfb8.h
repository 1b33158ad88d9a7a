// AES-128-CFB8 with the CPU's AES instructions (cfb8.cc), exported by the addon next to the relay.
#pragma once

#include <node_api.h>

// The round keys (11 x 16 bytes) and the shift register (16 bytes).
#define CFB8_STATE_BYTES 192

// cfb8Init(state, key, iv) -> boolean: fills a state; false where the CPU has no AES instructions.
napi_value Cfb8Init(napi_env env, napi_callback_info info);
// cfb8Encrypt(state, input, output): the next input.length bytes of the stream into output (which may be input).
napi_value Cfb8Encrypt(napi_env env, napi_callback_info info);
// cfb8Decrypt(state, input, output): the same for received bytes; output must not overlap input.
napi_value Cfb8Decrypt(napi_env env, napi_callback_info info);
