/**
 * Container labels as a server file. Every key of a server file is a label `portal.<key>`; tables are written by
 * dotted path (`portal.motd.online.text`), arrays comma-separated (`portal.domains=a.example.com,b.example.com`) or
 * item by item with an index (`portal.addresses.0.address`, `portal.addresses.0.weight`). A label's value is always
 * text, so the text is given the type the server-file schema expects at that key: a number where it expects only a
 * number, `true` / `false` where it expects only a boolean, a list where it expects an array; wherever the schema
 * accepts a string the text stays as it is. Whatever does not convert stays text, and the schema's own decoding says
 * what is wrong with it, so a label gets the same checks and the same words as the key in a file.
 */
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import type { ConfigProblem } from "../../schema/problems.js"
import { ServerConfig } from "../../schema/ServerConfig.js"

export const LABEL_PREFIX = "portal."
/** Labels that steer discovery and are not keys of a server file. */
export const ENABLE_LABEL = "portal.enable"
export const PORT_LABEL = "portal.port"
const DISCOVERY_LABELS: ReadonlySet<string> = new Set([ENABLE_LABEL, PORT_LABEL])

/** The labels made into the shape a TOML server file parses to, and what is needed to name a label in a problem. */
export interface LabelTable {
  readonly raw: Record<string, unknown>
  /** Key path (dotted, array items by index) -> the label that gave it. */
  readonly labels: ReadonlyMap<string, string>
  /** Key paths whose label was a comma-separated list. */
  readonly lists: ReadonlySet<string>
  /** Labels that cannot be made into a table (an empty key, a key that is both a value and a table). */
  readonly problems: ReadonlyArray<{ readonly label: string; readonly message: string }>
}

/** A label tree: text at the leaves. Null-prototype objects: label keys are data, `__proto__` included. */
type Tree = { readonly [key: string]: Tree | LabelLeaf }
interface LabelLeaf {
  readonly _tag: "Leaf"
  readonly label: string
  readonly text: string
}
const isLeaf = (node: Tree | LabelLeaf): node is LabelLeaf => (node as { _tag?: unknown })._tag === "Leaf" && Object.getPrototypeOf(node) === Object.prototype

const SERVER_AST = Schema.encodedSchema(ServerConfig).ast

/** The concrete shapes an AST accepts, through unions, refinements and suspensions. */
const flatten = (ast: SchemaAST.AST, out: Array<SchemaAST.AST> = []): Array<SchemaAST.AST> => {
  switch (ast._tag) {
    case "Union":
      for (const member of ast.types) flatten(member, out)
      break
    case "Refinement":
      flatten(ast.from, out)
      break
    case "Transformation":
      flatten(ast.from, out)
      break
    case "Suspend":
      flatten(ast.f(), out)
      break
    default:
      out.push(ast)
  }
  return out
}

interface Expected {
  readonly string: boolean
  readonly number: boolean
  readonly boolean: boolean
  readonly table: ReadonlyArray<SchemaAST.TypeLiteral>
  /** Element shapes of the arrays it accepts. */
  readonly items: ReadonlyArray<SchemaAST.AST>
}

const expectedOf = (asts: ReadonlyArray<SchemaAST.AST>): Expected => {
  let string = false
  let number = false
  let boolean = false
  const table: Array<SchemaAST.TypeLiteral> = []
  const items: Array<SchemaAST.AST> = []
  for (const ast of asts.flatMap((one) => flatten(one))) {
    switch (ast._tag) {
      case "StringKeyword":
      case "TemplateLiteral":
        string = true
        break
      case "NumberKeyword":
        number = true
        break
      case "BooleanKeyword":
        boolean = true
        break
      case "Literal":
        if (typeof ast.literal === "string") string = true
        else if (typeof ast.literal === "number") number = true
        else if (typeof ast.literal === "boolean") boolean = true
        break
      case "TupleType":
        items.push(...ast.elements.map((element) => element.type), ...ast.rest.map((rest) => rest.type))
        break
      case "TypeLiteral":
        table.push(ast)
        break
    }
  }
  return { string, number, boolean, table, items }
}

/** The shapes a table key accepts (none for a key the schema does not know: it stays text, and is reported). */
const propertyShapes = (tables: ReadonlyArray<SchemaAST.TypeLiteral>, key: string): Array<SchemaAST.AST> =>
  tables.flatMap((table) => {
    const property = table.propertySignatures.find((signature) => signature.name === key)
    if (property !== undefined) return [property.type]
    return table.indexSignatures.map((index) => index.type)
  })

const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/
const INDEX = /^(?:0|[1-9]\d{0,5})$/

/** Label text, typed as the schema expects it at `path`. */
const fromText = (text: string, shapes: ReadonlyArray<SchemaAST.AST>, path: string, lists: Set<string>): unknown => {
  const expected = expectedOf(shapes)
  if (expected.string) return text
  const trimmed = text.trim()
  if (expected.number && NUMBER.test(trimmed)) return Number(trimmed)
  if (expected.boolean && (trimmed === "true" || trimmed === "false")) return trimmed === "true"
  if (expected.items.length > 0) {
    lists.add(path)
    return trimmed
      .split(",")
      .map((item) => item.trim())
      .filter((item) => item.length > 0)
      .map((item, index) => fromText(item, expected.items, `${path}.${index}`, lists))
  }
  return text
}

const fromTree = (tree: Tree, shapes: ReadonlyArray<SchemaAST.AST>, path: string, lists: Set<string>): unknown => {
  const expected = expectedOf(shapes)
  const keys = Object.keys(tree)
  const child = (key: string, childShapes: ReadonlyArray<SchemaAST.AST>, childPath: string) => {
    const node = tree[key]!
    return isLeaf(node) ? fromText(node.text, childShapes, childPath, lists) : fromTree(node, childShapes, childPath, lists)
  }
  const join = (key: string) => (path.length === 0 ? key : `${path}.${key}`)
  if (expected.items.length > 0 && expected.table.length === 0 && keys.every((key) => INDEX.test(key))) {
    // Items by index, in index order; gaps close up (labels 0, 1, 5 are three items).
    return keys
      .map(Number)
      .sort((a, b) => a - b)
      .map((index) => child(String(index), expected.items, join(String(index))))
  }
  const out: Record<string, unknown> = {}
  for (const key of keys) {
    // Defined, not assigned: a label named `portal.__proto__` is a key like any other (and reported as unknown).
    Object.defineProperty(out, key, {
      value: child(key, propertyShapes(expected.table, key), join(key)),
      enumerable: true,
      writable: true,
      configurable: true
    })
  }
  return out
}

/** Makes the `portal.*` labels of a container into a server file's shape. */
export const labelsToTable = (labels: Readonly<Record<string, string>>): LabelTable => {
  const problems: Array<{ readonly label: string; readonly message: string }> = []
  const origins = new Map<string, string>()
  const root: Record<string, Tree | LabelLeaf> = Object.create(null)
  const names = Object.keys(labels)
    .filter((name) => name.startsWith(LABEL_PREFIX) && !DISCOVERY_LABELS.has(name))
    .sort()
  for (const label of names) {
    const segments = label.slice(LABEL_PREFIX.length).split(".")
    if (segments.some((segment) => segment.length === 0)) {
      problems.push({ label, message: "has an empty key (two dots in a row, or a dot at the end)" })
      continue
    }
    let node = root
    let clash: string | undefined
    for (const [index, segment] of segments.entries()) {
      const last = index === segments.length - 1
      const existing = node[segment]
      const prefix = `${LABEL_PREFIX}${segments.slice(0, index + 1).join(".")}`
      if (last) {
        if (existing !== undefined) clash = isLeaf(existing) ? existing.label : `the labels under ${prefix}`
        else node[segment] = { _tag: "Leaf", label, text: labels[label]! }
      } else if (existing === undefined) {
        const next: Record<string, Tree | LabelLeaf> = Object.create(null)
        node[segment] = next
        node = next
      } else if (isLeaf(existing)) {
        clash = existing.label
        break
      } else node = existing as Record<string, Tree | LabelLeaf>
    }
    if (clash !== undefined) {
      problems.push({ label, message: `conflicts with ${clash}: a key is either a value or a table of keys` })
      continue
    }
    origins.set(segments.join("."), label)
  }
  const lists = new Set<string>()
  const raw = fromTree(root, [SERVER_AST], "", lists) as Record<string, unknown>
  return { raw, labels: origins, lists, problems }
}

/** `addresses[0].weight` -> ["addresses", "0", "weight"]: the key path of a problem, as label segments. */
const pathSegments = (path: string): Array<string> =>
  [...path.matchAll(/\[(\d+)\]|"((?:[^"\\]|\\.)*)"|([^.[\]"]+)/g)].map((match) => match[1] ?? match[3] ?? unquote(match[2]!))

/** A key that problems.ts quoted (JSON) because it is not bare. */
const unquote = (quoted: string): string => {
  try {
    const value: unknown = JSON.parse(`"${quoted}"`)
    return typeof value === "string" ? value : quoted
  } catch {
    return quoted
  }
}

/** The label a problem's key path comes from: the label itself, the list it is an item of, or the label it would be. */
export const labelOf = (table: LabelTable, path: string): string => {
  const segments = pathSegments(path)
  for (let length = segments.length; length > 0; length--) {
    const key = segments.slice(0, length).join(".")
    const label = table.labels.get(key)
    if (label === undefined) continue
    const item = segments[length]
    return length < segments.length && table.lists.has(key) && item !== undefined && INDEX.test(item)
      ? `${label} (item ${Number(item) + 1})`
      : label
  }
  return `${LABEL_PREFIX}${segments.join(".")}`
}

/** A server-file problem in the words of labels: the key path becomes the label's name. */
export const labelProblem = (table: LabelTable, problem: ConfigProblem): ConfigProblem => {
  if (problem.path.length === 0) return problem
  const segments = pathSegments(problem.path)
  const parent = segments.slice(0, -1).join(".")
  // An unknown key's "did you mean" names a key of the same table; for labels, the whole label.
  const message = problem.message.replace(
    /^(unknown key )\(did you mean "([^"]+)"\?\)/,
    (_, start: string, key: string) => `${start}(did you mean "${LABEL_PREFIX}${parent.length > 0 ? `${parent}.` : ""}${key}"?)`
  )
  return { ...problem, path: `label ${labelOf(table, problem.path)}`, message }
}
