/** AES-128-CFB8 against minecraft-protocol's cipher (the one its clients and servers use), on streams cut anywhere. */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { createDecryptor, createEncryptor, type StreamCipher } from "../../src/protocol/cipher.js"
import { encryption, runTransform, seeded, splitRandomly } from "./mcPeer.js"

const cipherOf = (made: ReturnType<typeof createEncryptor>): StreamCipher => {
  if (made._tag === "Invalid") throw new Error(made.reason)
  return made
}

describe("AES-128-CFB8", () => {
  const secret = randomBytes(16)
  const plain = randomBytes(100_000)

  it("Portal's encryption, cut at random points, is decrypted by minecraft-protocol's decipher", async () => {
    const random = seeded(3)
    const encryptor = cipherOf(createEncryptor(secret))
    const encrypted = splitRandomly(plain, random, 5000).map((piece) => encryptor.update(piece))
    const decrypted = await runTransform(encryption.createDecipher(secret), splitRandomly(Buffer.concat(encrypted), random, 3000))
    expect(Buffer.concat(decrypted).equals(plain)).toBe(true)
  })

  it("minecraft-protocol's encryption, cut at random points, is decrypted by Portal", async () => {
    const random = seeded(4)
    const encrypted = Buffer.concat(await runTransform(encryption.createCipher(secret), splitRandomly(plain, random, 4000)))
    expect(encrypted.equals(plain)).toBe(false)
    const decryptor = cipherOf(createDecryptor(secret))
    const decrypted = splitRandomly(encrypted, random, 1500).map((piece) => decryptor.update(piece))
    expect(Buffer.concat(decrypted).equals(plain)).toBe(true)
  })

  it("keeps one state per direction: the two directions of a connection do not disturb each other", () => {
    const toClient = cipherOf(createEncryptor(secret))
    const fromClient = cipherOf(createDecryptor(secret))
    const clientIn = cipherOf(createDecryptor(secret))
    const clientOut = cipherOf(createEncryptor(secret))
    const a = Buffer.from("server to client, first")
    const b = Buffer.from("client to server")
    const c = Buffer.from("server to client, second")
    const wireA = toClient.update(a)
    const wireB = clientOut.update(b)
    const wireC = toClient.update(c)
    expect(clientIn.update(wireA)).toEqual(a)
    expect(fromClient.update(wireB)).toEqual(b)
    expect(clientIn.update(wireC)).toEqual(c)
  })

  it("refuses a secret that is not 16 bytes", () => {
    for (const length of [0, 15, 17, 32]) {
      expect(createEncryptor(Buffer.alloc(length))).toEqual({ _tag: "Invalid", reason: `shared secret of ${length} bytes (need 16)` })
      expect(createDecryptor(Buffer.alloc(length))._tag).toBe("Invalid")
    }
  })
})
