/** Velocity modern forwarding: the backend side written here independently (HMAC check and payload reader). */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { describe, expect, it } from "vitest"
import {
  chooseForwardingVersion,
  encodeModernForwardingResponse,
  type ModernForwardingInput,
  requestedForwardingVersion
} from "../../src/protocol/modernForwarding.js"

/** What Paper's VelocityProxy does with the response: check the HMAC, then read the payload. */
const backendReads = (secret: string, data: Buffer) => {
  const signature = data.subarray(0, 32)
  const payload = data.subarray(32)
  const expected = createHmac("sha256", Buffer.from(secret, "utf8")).update(payload).digest()
  if (!timingSafeEqual(signature, expected)) return { verified: false as const }
  let at = 0
  const varInt = () => {
    let value = 0
    for (let shift = 0; ; shift += 7) {
      const byte = payload[at++]!
      value |= (byte & 0x7f) << shift
      if ((byte & 0x80) === 0) return value
    }
  }
  const string = () => {
    const length = varInt()
    const text = payload.toString("utf8", at, at + length)
    at += length
    return text
  }
  const bytes = (length: number) => {
    const out = payload.subarray(at, at + length)
    at += length
    return out
  }
  const uuid = () => {
    const hex = bytes(16).toString("hex")
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
  }
  const version = varInt()
  const address = string()
  const id = uuid()
  const name = string()
  const properties: Array<{ name: string; value: string; signature?: string }> = []
  for (let n = varInt(); n > 0; n--) {
    const propertyName = string()
    const value = string()
    if (payload[at++] === 1) properties.push({ name: propertyName, value, signature: string() })
    else properties.push({ name: propertyName, value })
  }
  let key: { expiresAt: bigint; key: Buffer; signature: Buffer; holder?: string | null } | undefined
  if (version === 2 || version === 3) {
    const expiresAt = payload.readBigInt64BE(at)
    at += 8
    key = { expiresAt, key: bytes(varInt()), signature: bytes(varInt()) }
    if (version === 3) key.holder = payload[at++] === 1 ? uuid() : null
  }
  return { verified: true as const, version, address, uuid: id, name, properties, key, rest: payload.length - at }
}

const secret = "a forwarding secret"
const base: ModernForwardingInput = {
  secret,
  requestData: Buffer.from([4]),
  protocolVersion: 769,
  clientIp: "203.0.113.7",
  uuid: "069a79f444e94726a5befca90e38aaf5",
  name: "Notch",
  properties: [
    { name: "textures", value: "e30=", signature: "c2ln" },
    { name: "empty-signature", value: "v", signature: "" }
  ]
}

const encode = (input: ModernForwardingInput) => {
  const out = encodeModernForwardingResponse(input)
  if (out._tag === "Invalid") throw new Error(out.reason)
  return out
}

describe("modern forwarding response", () => {
  it("is signed with the secret and carries address, UUID, name and properties (version 4 for 1.19.3+)", () => {
    const response = encode(base)
    expect(response.version).toBe(4)
    expect(backendReads(secret, response.data)).toEqual({
      verified: true,
      version: 4,
      address: "203.0.113.7",
      uuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5",
      name: "Notch",
      // An empty signature is written as none, as Velocity does.
      properties: [
        { name: "textures", value: "e30=", signature: "c2ln" },
        { name: "empty-signature", value: "v" }
      ],
      key: undefined,
      rest: 0
    })
  })

  it("is refused by a backend with another secret", () => {
    expect(backendReads("another secret", encode(base).data)).toEqual({ verified: false })
    expect(backendReads(secret, encode({ ...base, secret: Buffer.from(secret, "utf8") }).data).verified).toBe(true)
  })

  it("removes an IPv6 scope from the address", () => {
    expect(backendReads(secret, encode({ ...base, clientIp: "fe80::1%eth0" }).data)).toMatchObject({ address: "fe80::1" })
  })

  it("version 1 when the backend asks for nothing, for 1 or for a version Portal cannot fill", () => {
    for (const requestData of [Buffer.alloc(0), Buffer.from([1]), Buffer.from([1, 2]), Buffer.from([0]), Buffer.from([0xff])]) {
      expect(encode({ ...base, requestData }).version).toBe(1)
    }
    // 1.19.3+ clients have no key to send: version 2 or 3 requested gives 1 (as Velocity).
    expect(encode({ ...base, requestData: Buffer.from([3]) }).version).toBe(1)
    expect(backendReads(secret, encode({ ...base, requestData: Buffer.from([3]) }).data)).toMatchObject({ version: 1, key: undefined, rest: 0 })
  })

  it("carries the player's 1.19 key in version 2 and the 1.19.1-1.19.2 key with its holder in version 3", () => {
    const publicKey = { expiresAt: 1_700_000_000_000n, key: randomBytes(294), signature: randomBytes(512) }
    const v2 = encode({ ...base, protocolVersion: 759, requestData: Buffer.from([4]), publicKey })
    expect(v2.version).toBe(2)
    expect(backendReads(secret, v2.data)).toMatchObject({ version: 2, key: publicKey, rest: 0 })

    const holder = "069a79f4-44e9-4726-a5be-fca90e38aaf5"
    const v3 = encode({ ...base, protocolVersion: 760, requestData: Buffer.from([3]), publicKey, keyHolder: holder })
    expect(v3.version).toBe(3)
    expect(backendReads(secret, v3.data)).toMatchObject({ version: 3, key: { ...publicKey, holder }, rest: 0 })
    const noHolder = encode({ ...base, protocolVersion: 760, requestData: Buffer.from([4]), publicKey })
    expect(backendReads(secret, noHolder.data)).toMatchObject({ version: 3, key: { holder: null }, rest: 0 })

    // A 1.19.1 key cannot be written as version 2: a backend allowing only 2 gets 1.
    expect(encode({ ...base, protocolVersion: 760, requestData: Buffer.from([2]), publicKey }).version).toBe(1)
    // Without a key, 1.19-1.19.2 clients get 1.
    expect(encode({ ...base, protocolVersion: 759, requestData: Buffer.from([4]) }).version).toBe(1)
  })

  it("chooses versions as Velocity's findForwardingVersion", () => {
    const cases: Array<[requested: number, protocol: number, hasKey: boolean, expected: number]> = [
      [1, 769, false, 1],
      [4, 769, false, 4],
      [9, 769, false, 4],
      [3, 761, false, 1],
      [4, 761, false, 4],
      [4, 759, true, 2],
      [2, 759, true, 2],
      [4, 760, true, 3],
      [3, 760, true, 3],
      [2, 760, true, 1],
      [4, 758, true, 1],
      [4, 758, false, 1],
      [-1, 769, false, 1]
    ]
    for (const [requested, protocol, hasKey, expected] of cases) {
      expect(chooseForwardingVersion(requested, protocol, hasKey), `${requested} ${protocol} ${hasKey}`).toBe(expected)
    }
    expect(requestedForwardingVersion(Buffer.from([4]))).toBe(4)
    expect(requestedForwardingVersion(Buffer.from([0x84]))).toBe(-124)
  })

  it("refuses a UUID that is not one, as a value", () => {
    expect(encodeModernForwardingResponse({ ...base, uuid: "nope" })._tag).toBe("Invalid")
    expect(encodeModernForwardingResponse({ ...base, keyHolder: "nope" })._tag).toBe("Invalid")
  })
})
