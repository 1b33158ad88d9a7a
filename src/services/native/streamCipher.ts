/**
 * The online-mode stream cipher (AES-128-CFB8) through the addon's AES instructions (native/cfb8.cc) where the CPU
 * has them, else Node's (protocol/cipher.ts). Same bytes either way; the addon's costs a game's small packets about
 * half as much to encrypt and a fifth as much to decrypt, and no call into Node's crypto per packet.
 */
import { createDecryptor as nodeDecryptor, createEncryptor as nodeEncryptor, SHARED_SECRET_BYTES, type StreamCipher } from "../../protocol/cipher.js"
import { type Invalid, invalid } from "../../protocol/result.js"
import { loadNativeAddon } from "./addon.js"

/** native/cfb8.h's CFB8_STATE_BYTES: 11 round keys and the shift register. */
const STATE_BYTES = 192

type Run = (state: Uint8Array, input: Uint8Array, output: Uint8Array) => void

interface Cfb8 {
  readonly init: (state: Uint8Array, key: Uint8Array, iv: Uint8Array) => boolean
  readonly encrypt: Run
  readonly decrypt: Run
}

let cfb8: Cfb8 | null | undefined

/** The addon's cipher when it is built with one and the CPU has AES instructions; looked up once. */
const nativeCfb8 = (): Cfb8 | undefined => {
  if (cfb8 === undefined) {
    cfb8 = null
    const loaded = loadNativeAddon()
    if ("addon" in loaded && typeof loaded.addon.cfb8Init === "function") {
      const { cfb8Init, cfb8Encrypt, cfb8Decrypt } = loaded.addon
      if (cfb8Init(new Uint8Array(STATE_BYTES), new Uint8Array(16), new Uint8Array(16))) cfb8 = { init: cfb8Init, encrypt: cfb8Encrypt, decrypt: cfb8Decrypt }
    }
  }
  return cfb8 ?? undefined
}

/** Whether the stream ciphers run on the addon (diagnostics and tests). */
export const nativeStreamCipher = (): boolean => nativeCfb8() !== undefined

const make = (secret: Buffer, decrypt: boolean): StreamCipher | Invalid => {
  const native = nativeCfb8()
  if (native === undefined) return decrypt ? nodeDecryptor(secret) : nodeEncryptor(secret)
  if (secret.length !== SHARED_SECRET_BYTES) return invalid(`shared secret of ${secret.length} bytes (need ${SHARED_SECRET_BYTES})`)
  const state = new Uint8Array(STATE_BYTES)
  native.init(state, secret, secret)
  const run = decrypt ? native.decrypt : native.encrypt
  return {
    _tag: "Cipher",
    // A fresh output, as Node's update gives: the input may be a read buffer the next read overwrites.
    update: (data) => {
      if (data.length === 0) return data
      const out = Buffer.allocUnsafe(data.length)
      run(state, data, out)
      return out
    }
  }
}

/** The cipher for bytes Portal sends on an encrypted connection. */
export const createEncryptor = (sharedSecret: Buffer): StreamCipher | Invalid => make(sharedSecret, false)

/** The cipher for bytes Portal receives on an encrypted connection. */
export const createDecryptor = (sharedSecret: Buffer): StreamCipher | Invalid => make(sharedSecret, true)
