/** What a `favicon` value in a MOTD table means, and whether bytes are a server-list icon. */

export type FaviconSource =
  | { readonly _tag: "Inline"; readonly png: Buffer }
  | { readonly _tag: "Url"; readonly url: string }
  | { readonly _tag: "File"; readonly path: string }

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
const BASE64 = /^[A-Za-z0-9+/\s]+={0,2}$/

/** `data:image/png;base64,...`, an http(s) URL, a base64 PNG, or else a file path. */
export const classifyFavicon = (value: string): FaviconSource => {
  const text = value.trim()
  const dataUri = /^data:image\/png;base64,(.*)$/s.exec(text)
  if (dataUri !== null) return { _tag: "Inline", png: Buffer.from(dataUri[1]!, "base64") }
  if (/^https?:\/\//i.test(text)) return { _tag: "Url", url: text }
  if (text.length >= 64 && BASE64.test(text)) {
    const png = Buffer.from(text, "base64")
    if (png.subarray(0, 8).equals(PNG_MAGIC)) return { _tag: "Inline", png }
  }
  return { _tag: "File", path: text }
}

/**
 * The largest favicon accepted, in bytes. The whole status answer is a string of at most 32767 characters to the
 * client (a longer one and the server list cannot read the entry at all), and a favicon travels in base64 (4 bytes
 * for 3): 20 KiB of PNG take 27,330 of them and leave the rest to the MOTD, the version and the player sample. A
 * 64x64 server icon is usually 2 to 10 KiB, 16.5 KiB stored without compression.
 */
export const FAVICON_MAX_BYTES = 20 * 1024

/** Why a favicon of `bytes` is refused, if it is. */
export const faviconSizeProblem = (bytes: number | bigint): string | undefined =>
  bytes > FAVICON_MAX_BYTES
    ? `is ${bytes} bytes, over the ${FAVICON_MAX_BYTES} a server-list answer has room for (a 64x64 icon is usually 2 to 10 KiB)`
    : undefined

/** Checks that bytes are a 64x64 PNG (what the client shows) of at most FAVICON_MAX_BYTES; returns the reason when not. */
export const checkFaviconPng = (png: Buffer): string | undefined => {
  const size = faviconSizeProblem(png.length)
  if (size !== undefined) return size
  if (png.length < 24 || !png.subarray(0, 8).equals(PNG_MAGIC) || png.toString("latin1", 12, 16) !== "IHDR") {
    return "is not a PNG image"
  }
  const width = png.readUInt32BE(16)
  const height = png.readUInt32BE(20)
  if (width !== 64 || height !== 64) return `must be 64x64 pixels, this PNG is ${width}x${height}`
  return undefined
}

export const faviconDataUri = (png: Buffer): string => `data:image/png;base64,${png.toString("base64")}`
