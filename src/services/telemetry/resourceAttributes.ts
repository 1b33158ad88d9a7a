/**
 * `OTEL_RESOURCE_ATTRIBUTES` as the OpenTelemetry specification reads it: `key=value` pairs separated by commas, each
 * key and value percent-decoded (so a value may hold `,`, `=` or a quote as `%2C`, `%3D`, `%22`) and trimmed. A pair
 * that is not `key=value`, has an empty key or does not decode is left out, and named in `skipped`.
 */
export const parseResourceAttributes = (text: string): { readonly attributes: Record<string, string>; readonly skipped: ReadonlyArray<string> } => {
  const attributes: Record<string, string> = {}
  const skipped: Array<string> = []
  for (const pair of text.split(",")) {
    if (pair.trim().length === 0) continue
    const equals = pair.indexOf("=")
    const decoded = equals < 0 ? undefined : decode(pair.slice(0, equals).trim(), pair.slice(equals + 1).trim())
    if (decoded === undefined || decoded.key.length === 0) skipped.push(pair.trim())
    else attributes[decoded.key] = decoded.value
  }
  return { attributes, skipped }
}

const decode = (key: string, value: string): { readonly key: string; readonly value: string } | undefined => {
  try {
    return { key: decodeURIComponent(key), value: decodeURIComponent(value) }
  } catch {
    return undefined
  }
}
