/** docs/configuration.md documents exactly the keys the schemas accept. */
import { Schema, SchemaAST } from "effect"
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { GlobalConfig } from "../src/schema/GlobalConfig.js"
import { MOTD_STATES } from "../src/schema/common.js"
import { ServerConfig } from "../src/schema/ServerConfig.js"

/** Every key path the encoded (file) side of a schema accepts; arrays add nothing, records add `<id>`. */
const schemaKeys = (ast: SchemaAST.AST, prefix = "", out = new Set<string>()): Set<string> => {
  switch (ast._tag) {
    case "TypeLiteral":
      for (const property of ast.propertySignatures) {
        const key = `${prefix}${String(property.name)}`
        out.add(key)
        schemaKeys(property.type, `${key}.`, out)
      }
      for (const index of ast.indexSignatures) {
        out.add(`${prefix}<id>`)
        schemaKeys(index.type, `${prefix}<id>.`, out)
      }
      break
    case "Union":
      for (const member of ast.types) schemaKeys(member, prefix, out)
      break
    case "TupleType":
      for (const element of [...ast.elements.map((e) => e.type), ...ast.rest.map((r) => r.type)]) schemaKeys(element, prefix, out)
      break
    case "Refinement":
      schemaKeys(ast.from, prefix, out)
      break
    case "Transformation":
      schemaKeys(ast.from, prefix, out)
      break
    case "Suspend":
      schemaKeys(ast.f(), prefix, out)
      break
  }
  return out
}

/** Motd tables have one key per state with the same fields: the docs write them once as `<state>`. */
const collapseStates = (keys: Set<string>): Set<string> =>
  new Set([...keys].map((key) => key.replace(new RegExp(`^(motd|default_motd)\\.(${MOTD_STATES.join("|")})(?=\\.|$)`), "$1.<state>")))

/** Key paths documented in one part of the page: table headings give the prefix, table rows the keys. */
const documentedKeys = (markdown: string): Set<string> => {
  const out = new Set<string>()
  let prefix: string | undefined
  for (const line of markdown.split("\n")) {
    const heading = /^###\s+(.*)$/.exec(line)
    if (heading !== null) {
      const table = /`\[\[?([A-Za-z0-9_.<>]+)\]\]?`/.exec(heading[1]!)
      prefix = heading[1] === "Top level" ? "" : table !== null ? `${table[1]}.` : undefined
      if (table !== null) {
        // The table itself is a key of its parent.
        const parts = table[1]!.split(".")
        for (let i = 1; i <= parts.length; i++) out.add(parts.slice(0, i).join("."))
      }
      continue
    }
    const row = /^\|\s*`([^`]+)`\s*\|/.exec(line)
    if (row !== null && prefix !== undefined) out.add(`${prefix}${row[1]}`)
  }
  return out
}

const page = readFileSync("docs/configuration.md", "utf8")
const serverStart = page.indexOf("## Server file")
const globalDocs = documentedKeys(page.slice(0, serverStart))
const serverDocs = documentedKeys(page.slice(serverStart))

const compare = (documented: Set<string>, schema: Set<string>) => ({
  undocumented: [...schema].filter((key) => !documented.has(key)).sort(),
  unknownToSchema: [...documented].filter((key) => !schema.has(key)).sort()
})

describe("docs/configuration.md", () => {
  it("documents every key of the global file and no other", () => {
    const keys = collapseStates(schemaKeys(Schema.encodedSchema(GlobalConfig).ast))
    expect(keys.size).toBeGreaterThan(60)
    expect(compare(globalDocs, keys)).toEqual({ undocumented: [], unknownToSchema: [] })
  })

  it("documents every key of the server file and no other", () => {
    const keys = collapseStates(schemaKeys(Schema.encodedSchema(ServerConfig).ast))
    expect(keys.size).toBeGreaterThan(40)
    expect(compare(serverDocs, keys)).toEqual({ undocumented: [], unknownToSchema: [] })
  })
})
