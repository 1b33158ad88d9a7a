/** Server hash vectors, RSA decryption with the padding checked by hand, and the 1.19 signed verify token. */
import { constants, createHash, createPublicKey, generateKeyPairSync, publicEncrypt, randomBytes, sign } from "node:crypto"
import { describe, expect, it } from "vitest"
import {
  decryptSharedSecret,
  generateServerKeyPair,
  newVerifyToken,
  rsaDecrypt,
  serverHash,
  verifySignedVerifyToken
} from "../../src/protocol/loginCrypto.js"

describe("server hash", () => {
  it("matches the vectors of the protocol notes", () => {
    // SHA-1 of the name alone: serverId carries it, secret and key are empty.
    expect(serverHash("Notch", Buffer.alloc(0), Buffer.alloc(0))).toBe("4ed1f46bbe04bc756bcb17c0c7ce3e4632f06a48")
    expect(serverHash("jeb_", Buffer.alloc(0), Buffer.alloc(0))).toBe("-7c9d5b0044c130109a5d7b5fb5c317c02b4e28c1")
    expect(serverHash("simon", Buffer.alloc(0), Buffer.alloc(0))).toBe("88e16a1019277b15d58faf0541e11910eb756f6")
  })

  it("hashes serverId, secret and key in that order, as Java's BigInteger prints the digest", () => {
    const secret = randomBytes(16)
    const key = randomBytes(162)
    const digest = createHash("sha1").update("").update(secret).update(key).digest()
    const asBigInt = BigInt.asIntN(160, BigInt(`0x${digest.toString("hex")}`))
    expect(serverHash("", secret, key)).toBe(asBigInt.toString(16))
  })
})

describe("RSA", () => {
  const pair = generateServerKeyPair()
  /** The client's view of the key: what it parses out of Encryption Request. */
  const clientKey = createPublicKey({ key: pair.publicKeyDer, format: "der", type: "spki" })

  it("the public key is X.509 SubjectPublicKeyInfo DER of a 1024-bit key", () => {
    expect(pair.publicKeyDer[0]).toBe(0x30)
    expect(pair.publicKeyDer.length).toBe(162)
    expect(pair.privateKey.asymmetricKeyDetails?.modulusLength).toBe(1024)
  })

  it("decrypts what a client encrypts with PKCS#1 v1.5 (as minecraft-protocol's client does)", () => {
    for (let i = 0; i < 20; i++) {
      const secret = randomBytes(16)
      const encrypted = publicEncrypt({ key: clientKey, padding: constants.RSA_PKCS1_PADDING }, secret)
      expect(decryptSharedSecret(pair.privateKey, encrypted)).toEqual({ _tag: "Decrypted", data: secret })
      const token = randomBytes(4)
      const encryptedToken = publicEncrypt({ key: clientKey, padding: constants.RSA_PKCS1_PADDING }, token)
      expect(rsaDecrypt(pair.privateKey, encryptedToken, 4)).toEqual({ _tag: "Decrypted", data: token })
    }
  })

  /** Encrypts a hand-made 128-byte block with no padding, so every padding defect can be tried. */
  const rawEncrypt = (block: Buffer) =>
    publicEncrypt({ key: clientKey, padding: constants.RSA_NO_PADDING }, block)
  const block = (message: Buffer, edit?: (b: Buffer) => void) => {
    const out = Buffer.alloc(128)
    out[0] = 0x00
    out[1] = 0x02
    const separator = 128 - message.length - 1
    for (let i = 2; i < separator; i++) out[i] = 1 + (i % 255)
    out[separator] = 0x00
    message.copy(out, separator + 1)
    edit?.(out)
    return out
  }

  it("accepts a well-formed hand-made block (the test's padding is right)", () => {
    const secret = randomBytes(16)
    expect(decryptSharedSecret(pair.privateKey, rawEncrypt(block(secret)))).toEqual({ _tag: "Decrypted", data: secret })
  })

  it("refuses bad paddings and wrong lengths with one and the same reason", () => {
    const secret = randomBytes(16)
    const bad = [
      block(secret, (b) => (b[0] = 0x01)),
      block(secret, (b) => (b[1] = 0x01)),
      block(secret, (b) => (b[1] = 0x00)),
      block(secret, (b) => (b[5] = 0x00)),
      block(secret, (b) => (b[110] = 0x00)),
      block(secret, (b) => (b[111] = 0x07)),
      block(randomBytes(15)),
      block(randomBytes(17)),
      block(randomBytes(24)),
      block(Buffer.alloc(0)),
      block(randomBytes(117))
    ]
    for (const candidate of bad) {
      expect(decryptSharedSecret(pair.privateKey, rawEncrypt(candidate))).toEqual({ _tag: "Invalid", reason: "bad RSA block (padding or length)" })
    }
    // A 17-byte message whose first byte is 0 puts a 0 where a 16-byte secret's separator goes: still refused.
    const tricky = Buffer.concat([Buffer.from([0]), randomBytes(16)])
    expect(decryptSharedSecret(pair.privateKey, rawEncrypt(block(tricky)))._tag).toBe("Invalid")
    // A 16-byte expectation with fewer than 8 padding bytes left is impossible.
    expect(rsaDecrypt(pair.privateKey, rawEncrypt(block(randomBytes(16))), 118)._tag).toBe("Invalid")
  })

  it("refuses ciphertexts of the wrong size or out of range without throwing", () => {
    expect(decryptSharedSecret(pair.privateKey, randomBytes(127))._tag).toBe("Invalid")
    expect(decryptSharedSecret(pair.privateKey, randomBytes(129))._tag).toBe("Invalid")
    expect(decryptSharedSecret(pair.privateKey, Buffer.alloc(128, 0xff))._tag).toBe("Invalid")
    expect(decryptSharedSecret(pair.privateKey, Buffer.alloc(0))._tag).toBe("Invalid")
  })
})

describe("signed verify token (1.19-1.19.2)", () => {
  it("checks the client's SHA256withRSA signature over token and salt", () => {
    const player = generateKeyPairSync("rsa", { modulusLength: 1024 })
    const playerKeyDer = player.publicKey.export({ type: "spki", format: "der" })
    const verifyToken = randomBytes(4)
    const salt = -42n
    const saltBytes = Buffer.alloc(8)
    saltBytes.writeBigInt64BE(salt)
    const signature = sign("sha256", Buffer.concat([verifyToken, saltBytes]), player.privateKey)
    expect(verifySignedVerifyToken({ playerKeyDer, verifyToken, salt, signature })).toBe(true)
    expect(verifySignedVerifyToken({ playerKeyDer, verifyToken: randomBytes(4), salt, signature })).toBe(false)
    expect(verifySignedVerifyToken({ playerKeyDer, verifyToken, salt: 41n, signature })).toBe(false)
    expect(verifySignedVerifyToken({ playerKeyDer: randomBytes(100), verifyToken, salt, signature })).toBe(false)
  })
})

describe("verify tokens", () => {
  it("are 4 bytes of their own each, drawn afresh across refills of the pool", () => {
    const tokens = Array.from({ length: 3000 }, () => newVerifyToken())
    expect(tokens.every((token) => token.length === 4)).toBe(true)
    // 3,000 draws of 32 bits collide about once in a thousand runs; a pool handing bytes out twice would repeat many.
    expect(new Set(tokens.map((token) => token.toString("hex"))).size).toBeGreaterThanOrEqual(2995)
    const copy = Buffer.from(tokens[1]!)
    tokens[0]!.fill(0xff)
    expect(tokens[1]).toEqual(copy)
  })
})
