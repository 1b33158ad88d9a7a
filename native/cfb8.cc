// AES-128-CFB8, the stream cipher of online-mode Minecraft connections, with the CPU's AES instructions.
//
// CFB8 runs one AES block per byte. OpenSSL (Node's `aes-128-cfb8`) does each byte's block after the previous one in
// both directions, and Node adds about a microsecond and a fresh buffer to every update() call, which at a game's
// rate of small packets costs more than the cipher itself. Encryption has to stay sequential (each byte's block
// input ends with the previous ciphertext byte), but decryption does not: every block input is a window of the
// ciphertext already received, so eight are computed side by side and the CPU pipelines their rounds.
//
// The state lives in a JS-owned buffer of CFB8_STATE_BYTES: the 11 round keys, then the 16-byte shift register. Where
// the CPU has no AES instructions (or is not x86-64) cfb8Init() says so and Portal keeps Node's cipher.

#include "cfb8.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define PORTAL_CFB8_AESNI 1
#endif

namespace {

constexpr size_t kRoundKeysBytes = 11 * 16;
constexpr size_t kRegisterAt = kRoundKeysBytes;

#ifdef PORTAL_CFB8_AESNI

bool cpuHasAes() {
  static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse2"));
  return has;
}

__attribute__((target("aes,sse2"))) inline __m128i expandStep(__m128i key, __m128i assist) {
  assist = _mm_shuffle_epi32(assist, 0xff);
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  return _mm_xor_si128(key, assist);
}

// The AES-128 key schedule (FIPS-197), with AESKEYGENASSIST doing SubWord(RotWord) and the round constant.
__attribute__((target("aes,sse2"))) void expandKey(const uint8_t* key, uint8_t* roundKeys) {
  __m128i k[11];
  k[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key));
  k[1] = expandStep(k[0], _mm_aeskeygenassist_si128(k[0], 0x01));
  k[2] = expandStep(k[1], _mm_aeskeygenassist_si128(k[1], 0x02));
  k[3] = expandStep(k[2], _mm_aeskeygenassist_si128(k[2], 0x04));
  k[4] = expandStep(k[3], _mm_aeskeygenassist_si128(k[3], 0x08));
  k[5] = expandStep(k[4], _mm_aeskeygenassist_si128(k[4], 0x10));
  k[6] = expandStep(k[5], _mm_aeskeygenassist_si128(k[5], 0x20));
  k[7] = expandStep(k[6], _mm_aeskeygenassist_si128(k[6], 0x40));
  k[8] = expandStep(k[7], _mm_aeskeygenassist_si128(k[7], 0x80));
  k[9] = expandStep(k[8], _mm_aeskeygenassist_si128(k[8], 0x1b));
  k[10] = expandStep(k[9], _mm_aeskeygenassist_si128(k[9], 0x36));
  for (int i = 0; i < 11; i++) _mm_storeu_si128(reinterpret_cast<__m128i*>(roundKeys + 16 * i), k[i]);
}

__attribute__((target("aes,sse2"))) inline void loadKeys(const uint8_t* state, __m128i* k) {
  for (int i = 0; i < 11; i++) k[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 16 * i));
}

__attribute__((target("aes,sse2"))) inline __m128i encryptBlock(__m128i block, const __m128i* k) {
  block = _mm_xor_si128(block, k[0]);
  for (int i = 1; i < 10; i++) block = _mm_aesenc_si128(block, k[i]);
  return _mm_aesenclast_si128(block, k[10]);
}

__attribute__((target("aes,sse2"))) void encryptAesni(uint8_t* state, const uint8_t* in, uint8_t* out, size_t length) {
  __m128i k[11];
  loadKeys(state, k);
  __m128i shift = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + kRegisterAt));
  for (size_t i = 0; i < length; i++) {
    const uint8_t c = in[i] ^ static_cast<uint8_t>(_mm_cvtsi128_si32(encryptBlock(shift, k)));
    out[i] = c;
    // The register drops its first byte and takes the ciphertext byte as its last.
    shift = _mm_or_si128(_mm_srli_si128(shift, 1), _mm_slli_si128(_mm_cvtsi32_si128(c), 15));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + kRegisterAt), shift);
}

// Byte i's block input is bytes [i, i + 16) of register || ciphertext: the first 16 come from `head` (the register
// followed by the first ciphertext bytes), the rest straight from the input.
__attribute__((target("aes,sse2"))) void decryptAesni(uint8_t* state, const uint8_t* in, uint8_t* out, size_t length) {
  __m128i k[11];
  loadKeys(state, k);
  uint8_t head[32] = {0};
  const size_t headBytes = length < 16 ? length : 16;
  std::memcpy(head, state + kRegisterAt, 16);
  std::memcpy(head + 16, in, headBytes);
  auto window = [&](size_t i) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(i < 16 ? head + i : in + (i - 16)));
  };
  size_t i = 0;
  for (; i + 8 <= length; i += 8) {
    __m128i b[8];
    for (int j = 0; j < 8; j++) b[j] = _mm_xor_si128(window(i + j), k[0]);
    for (int r = 1; r < 10; r++)
      for (int j = 0; j < 8; j++) b[j] = _mm_aesenc_si128(b[j], k[r]);
    for (int j = 0; j < 8; j++)
      out[i + j] = in[i + j] ^ static_cast<uint8_t>(_mm_cvtsi128_si32(_mm_aesenclast_si128(b[j], k[10])));
  }
  for (; i < length; i++) out[i] = in[i] ^ static_cast<uint8_t>(_mm_cvtsi128_si32(encryptBlock(window(i), k)));
  // The next register: the last 16 bytes of register || ciphertext.
  uint8_t next[16];
  if (length >= 16) {
    std::memcpy(next, in + length - 16, 16);
  } else {
    std::memcpy(next, state + kRegisterAt + length, 16 - length);
    std::memcpy(next + 16 - length, in, length);
  }
  std::memcpy(state + kRegisterAt, next, 16);
}

#endif

bool uint8Array(napi_env env, napi_value value, uint8_t** data, size_t* length) {
  bool is = false;
  if (napi_is_typedarray(env, value, &is) != napi_ok || !is) return false;
  napi_typedarray_type type;
  void* raw = nullptr;
  napi_value buffer;
  size_t offset;
  if (napi_get_typedarray_info(env, value, &type, length, &raw, &buffer, &offset) != napi_ok) return false;
  if (type != napi_uint8_array) return false;
  *data = static_cast<uint8_t*>(raw);
  return true;
}

bool arguments(napi_env env, napi_callback_info info, size_t count, uint8_t** data, size_t* lengths) {
  napi_value argv[3];
  size_t argc = 3;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < count) return false;
  for (size_t i = 0; i < count; i++)
    if (!uint8Array(env, argv[i], &data[i], &lengths[i])) return false;
  return true;
}

napi_value boolean(napi_env env, bool value) {
  napi_value result;
  napi_get_boolean(env, value, &result);
  return result;
}

napi_value Cfb8Run(napi_env env, napi_callback_info info, bool decrypt) {
  uint8_t* data[3];
  size_t lengths[3];
  if (!arguments(env, info, 3, data, lengths) || lengths[0] < CFB8_STATE_BYTES || lengths[2] < lengths[1]) {
    napi_throw_type_error(env, nullptr, "expected (state, input, output): Uint8Arrays, output at least as long as input");
    return nullptr;
  }
  const uint8_t* in = data[1];
  uint8_t* out = data[2];
  const size_t length = lengths[1];
  // Decryption reads ciphertext ahead of what it writes: the two must not share memory.
  if (decrypt && length > 0 && out < in + length && in < out + length) {
    napi_throw_range_error(env, nullptr, "cfb8Decrypt: input and output overlap");
    return nullptr;
  }
#ifdef PORTAL_CFB8_AESNI
  if (cpuHasAes()) {
    if (decrypt)
      decryptAesni(data[0], in, out, length);
    else
      encryptAesni(data[0], in, out, length);
    return nullptr;
  }
#endif
  napi_throw_error(env, nullptr, "cfb8: this CPU has no AES instructions");
  return nullptr;
}

}  // namespace

napi_value Cfb8Init(napi_env env, napi_callback_info info) {
  uint8_t* data[3];
  size_t lengths[3];
  if (!arguments(env, info, 3, data, lengths) || lengths[0] < CFB8_STATE_BYTES || lengths[1] != 16 || lengths[2] != 16) {
    napi_throw_type_error(env, nullptr, "expected (state, key, iv): Uint8Arrays of at least 192, 16 and 16 bytes");
    return nullptr;
  }
#ifdef PORTAL_CFB8_AESNI
  if (cpuHasAes()) {
    expandKey(data[1], data[0]);
    std::memcpy(data[0] + kRegisterAt, data[2], 16);
    return boolean(env, true);
  }
#endif
  return boolean(env, false);
}

napi_value Cfb8Encrypt(napi_env env, napi_callback_info info) { return Cfb8Run(env, info, false); }

napi_value Cfb8Decrypt(napi_env env, napi_callback_info info) { return Cfb8Run(env, info, true); }
