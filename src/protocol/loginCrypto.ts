/**
 * The cryptography of an online-mode login (Portal as the server towards the player): the RSA-1024 key pair whose
 * public half goes into Encryption Request, decrypting what the client encrypted with it, the check of the signed
 * verify token of 1.19-1.19.2, and the server hash that `hasJoined` takes.
 */
import { createHash, generateKeyPairSync, type KeyObject, privateDecrypt, constants as cryptoConstants, randomBytes, verify } from "node:crypto"
import { SHARED_SECRET_BYTES } from "./cipher.js"
import { type Invalid, invalid } from "./result.js"

export interface ServerKeyPair {
  readonly privateKey: KeyObject
  /** X.509 SubjectPublicKeyInfo DER, as Encryption Request carries it and the server hash takes it. */
  readonly publicKeyDer: Buffer
}

/** A fresh RSA-1024 key pair (vanilla's size; clients accept no other). Takes some milliseconds: make it once at start. */
export const generateServerKeyPair = (): ServerKeyPair => {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 1024, publicExponent: 65537 })
  return { privateKey, publicKeyDer: publicKey.export({ type: "spki", format: "der" }) }
}

/** Vanilla sends 4 random bytes. */
export const VERIFY_TOKEN_BYTES = 4

/** Tokens come from one buffer of CSPRNG bytes, refilled when used up: each randomBytes call costs about 10 µs. */
const TOKEN_POOL_BYTES = 4096
let tokenPool = Buffer.alloc(0)
let tokenPoolAt = 0

/** Fresh random bytes for each login, never shared: a copy out of the pool, which never hands the same bytes twice. */
export const newVerifyToken = (): Buffer => {
  if (tokenPoolAt + VERIFY_TOKEN_BYTES > tokenPool.length) {
    tokenPool = randomBytes(TOKEN_POOL_BYTES)
    tokenPoolAt = 0
  }
  const token = Buffer.from(tokenPool.subarray(tokenPoolAt, tokenPoolAt + VERIFY_TOKEN_BYTES))
  tokenPoolAt += VERIFY_TOKEN_BYTES
  return token
}

export type RsaDecrypt = { readonly _tag: "Decrypted"; readonly data: Buffer } | Invalid

/** One reason for every failure after the raw decryption, so the result reveals nothing about the padding. */
const BAD_PADDING = "bad RSA block (padding or length)"

/**
 * Decrypts a PKCS#1 v1.5 block the client made with Portal's public key and checks that it holds exactly
 * `expectedLength` bytes (16 for the shared secret, the token's length for the verify token).
 *
 * Node 20 refuses PKCS#1 v1.5 in `privateDecrypt` (the CVE-2023-46809 fix), so the block is decrypted raw
 * (RSA_NO_PADDING) and `00 02 PS 00 M` is checked here. With the length of M known, the 00 separator has one
 * possible place, so the check reads every byte the same way whatever they hold: no early return, no
 * data-dependent index; only the final verdict branches.
 */
export const rsaDecrypt = (privateKey: KeyObject, ciphertext: Buffer, expectedLength: number): RsaDecrypt => {
  let block: Buffer
  try {
    block = privateDecrypt({ key: privateKey, padding: cryptoConstants.RSA_NO_PADDING }, ciphertext)
  } catch (error) {
    return invalid(`RSA decryption failed: ${error instanceof Error ? error.message : String(error)}`)
  }
  const k = block.length
  const separator = k - expectedLength - 1
  // PKCS#1 v1.5 wants at least 8 padding bytes: 2 + 8 + 1 + M <= k.
  if (expectedLength < 0 || separator < 10) return invalid(BAD_PADDING)
  let bad = block[0]! | (block[1]! ^ 0x02) | block[separator]!
  for (let i = 2; i < separator; i++) {
    // 1 when the byte is zero, else 0, without a branch: (b - 1) >> 8 is -1 only for b = 0.
    bad |= ((block[i]! - 1) >> 8) & 1
  }
  if (bad !== 0) return invalid(BAD_PADDING)
  return { _tag: "Decrypted", data: Buffer.from(block.subarray(separator + 1)) }
}

/** The shared secret of Encryption Response: 16 bytes or Invalid. */
export const decryptSharedSecret = (privateKey: KeyObject, encrypted: Buffer): RsaDecrypt =>
  rsaDecrypt(privateKey, encrypted, SHARED_SECRET_BYTES)

/**
 * The 1.19-1.19.2 alternative to an encrypted verify token: the client's SHA256withRSA signature over
 * `verifyToken | salt (i64 BE)` with the chat key of its Login Start (X.509 DER), as Velocity's
 * InitialLoginSessionHandler checks it.
 */
export const verifySignedVerifyToken = (input: {
  readonly playerKeyDer: Buffer
  readonly verifyToken: Buffer
  readonly salt: bigint
  readonly signature: Buffer
}): boolean => {
  const salt = Buffer.alloc(8)
  salt.writeBigInt64BE(BigInt.asIntN(64, input.salt))
  try {
    return verify("sha256", Buffer.concat([input.verifyToken, salt]), { key: input.playerKeyDer, format: "der", type: "spki" }, input.signature)
  } catch {
    return false
  }
}

/**
 * The `serverId` of `hasJoined`: SHA-1 over serverId (ASCII), shared secret and public key DER, printed as a signed
 * two's-complement number in hex without leading zeros (Java's `new BigInteger(digest).toString(16)`).
 */
export const serverHash = (serverId: string, sharedSecret: Buffer, publicKeyDer: Buffer): string => {
  const digest = createHash("sha1").update(serverId, "latin1").update(sharedSecret).update(publicKeyDer).digest()
  const negative = (digest[0]! & 0x80) !== 0
  if (negative) {
    // Two's complement: invert every byte and add one.
    let carry = 1
    for (let i = digest.length - 1; i >= 0; i--) {
      const value = (~digest[i]! & 0xff) + carry
      digest[i] = value & 0xff
      carry = value >> 8
    }
  }
  const hex = digest.toString("hex").replace(/^0+/, "")
  return `${negative ? "-" : ""}${hex === "" ? "0" : hex}`
}
