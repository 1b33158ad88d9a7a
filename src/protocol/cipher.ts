/**
 * The stream cipher of online-mode connections: AES-128-CFB8 with key = IV = the 16-byte shared secret, applied to
 * every byte after Encryption Response, one independent state per direction. Node's `aes-128-cfb8` is the same
 * cipher minecraft-protocol and vanilla use.
 */
import { createCipheriv, createDecipheriv } from "node:crypto"
import { type Invalid, invalid } from "./result.js"

export const SHARED_SECRET_BYTES = 16

export interface StreamCipher {
  readonly _tag: "Cipher"
  /** Encrypts (or decrypts) the next bytes of the stream; the state carries over from call to call. */
  readonly update: (data: Buffer) => Buffer
}

const make = (secret: Buffer, decrypt: boolean): StreamCipher | Invalid => {
  if (secret.length !== SHARED_SECRET_BYTES) return invalid(`shared secret of ${secret.length} bytes (need ${SHARED_SECRET_BYTES})`)
  const cipher = decrypt ? createDecipheriv("aes-128-cfb8", secret, secret) : createCipheriv("aes-128-cfb8", secret, secret)
  return { _tag: "Cipher", update: (data) => cipher.update(data) }
}

/** The cipher for bytes Portal sends on an encrypted connection. */
export const createEncryptor = (sharedSecret: Buffer): StreamCipher | Invalid => make(sharedSecret, false)

/** The cipher for bytes Portal receives on an encrypted connection (give it to `FrameDecoder.setDecryption`). */
export const createDecryptor = (sharedSecret: Buffer): StreamCipher | Invalid => make(sharedSecret, true)
