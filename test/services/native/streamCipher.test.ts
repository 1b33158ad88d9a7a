/**
 * The addon's AES-128-CFB8 (native/cfb8.cc) against Node's and minecraft-protocol's, on streams cut anywhere
 * (short pieces run byte by byte in decryption, longer ones eight blocks at a time), with the key schedule and the
 * register carried from call to call.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import type { StreamCipher } from "../../../src/protocol/cipher.js"
import { loadNativeAddon } from "../../../src/services/native/addon.js"
import { createDecryptor, createEncryptor, nativeStreamCipher } from "../../../src/services/native/streamCipher.js"
import { encryption, runTransform, seeded, splitRandomly } from "../../protocol/mcPeer.js"

const cipherOf = (made: ReturnType<typeof createEncryptor>): StreamCipher => {
  if (made._tag === "Invalid") throw new Error(made.reason)
  return made
}

/** Piece lengths around the decryption's batches of 8 and its 16-byte register, then random ones. */
const cut = (data: Buffer, random: (below: number) => number): Array<Buffer> => {
  const lengths = [0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 100, 1000]
  const pieces: Array<Buffer> = []
  let at = 0
  for (let i = 0; at < data.length; i++) {
    const length = i < lengths.length ? lengths[i]! : 1 + random(3000)
    pieces.push(data.subarray(at, at + length))
    at += length
  }
  return pieces
}

describe("native AES-128-CFB8", () => {
  it("is what Portal uses on this machine (the addon is built and the CPU has AES instructions)", () => {
    const loaded = loadNativeAddon()
    expect("addon" in loaded ? "built" : loaded.reason).toBe("built")
    expect(nativeStreamCipher()).toBe(true)
  })

  it("gives Node's bytes, both ways, for 40 keys and IVs over streams cut anywhere", () => {
    const addon = (loadNativeAddon() as { addon: import("../../../src/services/native/addon.js").NativeAddon }).addon
    const random = seeded(11)
    for (let round = 0; round < 40; round++) {
      const key = randomBytes(16)
      const iv = round % 2 === 0 ? key : randomBytes(16)
      const plain = randomBytes(2000 + random(20_000))
      const encryptState = new Uint8Array(192)
      const decryptState = new Uint8Array(192)
      expect(addon.cfb8Init(encryptState, key, iv)).toBe(true)
      expect(addon.cfb8Init(decryptState, key, iv)).toBe(true)
      const encrypted = cut(plain, random).map((piece) => {
        const out = Buffer.alloc(piece.length)
        addon.cfb8Encrypt(encryptState, piece, out)
        return out
      })
      const wire = Buffer.concat(encrypted)
      expect(wire.equals(Buffer.concat([createCipheriv("aes-128-cfb8", key, iv).update(plain)]))).toBe(true)
      const decrypted = cut(wire, random).map((piece) => {
        const out = Buffer.alloc(piece.length)
        addon.cfb8Decrypt(decryptState, piece, out)
        return out
      })
      expect(Buffer.concat(decrypted).equals(plain)).toBe(true)
      expect(createDecipheriv("aes-128-cfb8", key, iv).update(wire).equals(plain)).toBe(true)
    }
  })

  it("encrypts in place, and refuses to decrypt into its own input or with a short state", () => {
    const addon = (loadNativeAddon() as { addon: import("../../../src/services/native/addon.js").NativeAddon }).addon
    const key = randomBytes(16)
    const state = new Uint8Array(192)
    addon.cfb8Init(state, key, key)
    const data = randomBytes(300)
    const expected = createCipheriv("aes-128-cfb8", key, key).update(data)
    addon.cfb8Encrypt(state, data, data)
    expect(data.equals(expected)).toBe(true)
    const wide = randomBytes(400)
    expect(() => addon.cfb8Decrypt(state, wide.subarray(0, 300), wide.subarray(10, 310))).toThrow(/overlap/)
    expect(() => addon.cfb8Encrypt(new Uint8Array(100), data, Buffer.alloc(300))).toThrow(/expected/)
    expect(() => addon.cfb8Encrypt(state, data, Buffer.alloc(299))).toThrow(/expected/)
    expect(addon.cfb8Init.bind(null, state, randomBytes(15), key)).toThrow(/expected/)
  })

  it("talks to minecraft-protocol's cipher both ways, leaving the input as it was", async () => {
    const secret = randomBytes(16)
    const plain = randomBytes(100_000)
    const random = seeded(5)
    const encryptor = cipherOf(createEncryptor(secret))
    const pieces = splitRandomly(plain, random, 5000)
    const copies = pieces.map((piece) => Buffer.from(piece))
    const encrypted = pieces.map((piece) => encryptor.update(piece))
    expect(pieces.every((piece, i) => piece.equals(copies[i]!))).toBe(true)
    const theirs = await runTransform(encryption.createDecipher(secret), splitRandomly(Buffer.concat(encrypted), random, 3000))
    expect(Buffer.concat(theirs).equals(plain)).toBe(true)

    const wire = Buffer.concat(await runTransform(encryption.createCipher(secret), splitRandomly(plain, random, 4000)))
    const decryptor = cipherOf(createDecryptor(secret))
    const received = splitRandomly(wire, random, 1500)
    const ours = received.map((piece) => decryptor.update(piece))
    expect(Buffer.concat(ours).equals(plain)).toBe(true)
    expect(Buffer.concat(received).equals(wire)).toBe(true)
  })

  it("refuses a secret that is not 16 bytes", () => {
    for (const length of [0, 15, 17, 32]) {
      expect(createEncryptor(Buffer.alloc(length))._tag).toBe("Invalid")
      expect(createDecryptor(Buffer.alloc(length))._tag).toBe("Invalid")
    }
  })
})
