/**
 * A fake of Mojang's session service on loopback HTTP: clients `join` (POST /session/minecraft/join, as
 * minecraft-protocol's online-mode client does), servers ask `hasJoined` (GET). Accounts are registered with a UUID
 * and a skin property; `mode` makes `hasJoined` answer late, 204, 500, garbage, or nothing at all.
 */
import { createHash } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach } from "vitest"

/** `slow`: as `normal`, a little under half a second later. */
export type SessionMode = "normal" | "slow" | "204" | "500" | "garbage" | "hang"

export interface Account {
  readonly name: string
  /** Undashed. */
  readonly id: string
  readonly accessToken: string
  readonly properties: ReadonlyArray<{ name: string; value: string; signature?: string }>
}

export interface SessionService {
  readonly url: string
  mode: SessionMode
  /** hasJoined questions asked so far. */
  readonly asked: Array<{ username: string; serverId: string }>
  account(name: string): Account
  close(): Promise<void>
}

const services: Array<SessionService> = []
afterEach(async () => {
  for (const service of services.splice(0)) await service.close()
})

const body = (request: http.IncomingMessage): Promise<string> =>
  new Promise((resolve) => {
    let text = ""
    request.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
    request.on("end", () => resolve(text))
  })

/** A deterministic account for `name`: its UUID from the name, a `textures` property that names it. */
const makeAccount = (name: string): Account => {
  const digest = createHash("sha256").update(`account:${name}`).digest("hex")
  const id = `${digest.slice(0, 12)}4${digest.slice(13, 16)}a${digest.slice(17, 32)}`
  const textures = Buffer.from(JSON.stringify({ profileName: name, textures: { SKIN: { url: `http://textures.example/${name}` } } })).toString("base64")
  return { name, id, accessToken: `token-${name}`, properties: [{ name: "textures", value: textures, signature: `sig-${name}` }] }
}

export const startSessionService = async (): Promise<SessionService> => {
  const accounts = new Map<string, Account>()
  const tokens = new Map<string, Account>()
  /** serverId by account id, from the client's join. */
  const joins = new Map<string, string>()
  const hanging = new Set<http.ServerResponse>()
  const service: SessionService = {
    url: "",
    mode: "normal",
    asked: [],
    account: (name) => {
      let account = accounts.get(name.toLowerCase())
      if (account === undefined) {
        account = makeAccount(name)
        accounts.set(name.toLowerCase(), account)
        tokens.set(account.accessToken, account)
      }
      return account
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const response of hanging) response.destroy()
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
  const server = http.createServer(async (request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost")
    if (request.method === "POST" && url.pathname === "/session/minecraft/join") {
      const sent = JSON.parse(await body(request)) as { accessToken: string; selectedProfile: string; serverId: string }
      const account = tokens.get(sent.accessToken)
      if (account === undefined || account.id !== sent.selectedProfile) {
        response.writeHead(403, { "content-type": "application/json" }).end(JSON.stringify({ error: "ForbiddenOperationException", errorMessage: "Invalid token" }))
        return
      }
      joins.set(account.id, sent.serverId)
      response.writeHead(204).end()
      return
    }
    if (request.method === "GET" && url.pathname === "/session/minecraft/hasJoined") {
      const username = url.searchParams.get("username") ?? ""
      const serverId = url.searchParams.get("serverId") ?? ""
      service.asked.push({ username, serverId })
      switch (service.mode) {
        case "204":
          response.writeHead(204).end()
          return
        case "500":
          response.writeHead(500).end("internal error")
          return
        case "garbage":
          response.writeHead(200, { "content-type": "application/json" }).end('{"id": 12, "name": [')
          return
        case "hang":
          hanging.add(response)
          return
        case "normal":
        case "slow": {
          const answer = () => {
            const account = accounts.get(username.toLowerCase())
            if (account === undefined || joins.get(account.id) !== serverId) {
              response.writeHead(204).end()
              return
            }
            response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: account.id, name: account.name, properties: account.properties }))
          }
          if (service.mode === "slow") setTimeout(answer, 400)
          else answer()
          return
        }
      }
    }
    response.writeHead(404).end()
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  ;(service as { url: string }).url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  services.push(service)
  return service
}
