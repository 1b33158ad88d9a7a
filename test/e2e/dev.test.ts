/** Development mode as a real process: the example configuration with embedded demo backends. */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { startPortal } from "../helpers/process.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { join, ping, reasonText } from "../peers/minecraft.js"

describe("--dev", () => {
  it("routes a real client to demo backends that say where it arrived", async () => {
    // The example configuration, on a free loopback port instead of 25565.
    const example = readFileSync("proxy.toml", "utf8").replace(/^bind = .*$/m, 'bind = "127.0.0.1:0"')
    const dir = makeConfigDir(example, {
      "lobby.toml": readFileSync("servers/lobby.toml", "utf8"),
      "survival.toml": readFileSync("servers/survival.toml", "utf8")
    })
    const portal = startPortal(["--config", dir.configFile, "--dev"])
    const [, port] = await portal.waitForOutput(/listening on 127\.0\.0\.1:(\d+)/)
    const answer = await ping(Number(port), "lobby.example.com")
    // The example's [motd.online] is laid over the demo backend's live answer.
    expect(reasonText(answer.description)).toBe("§aWelcome to the §llobby")
    expect(answer.version?.name).toBe("Portal demo")
    const result = await join(Number(port), "s1.survival.example.com", { username: "Newcomer" })
    expect(result._tag === "Kicked" && result.reason).toMatch(/Hello Newcomer!.*You reached server .*survival.* through Portal \(backend [12] of 2/s)
    expect(portal.output()).toMatch(/development mode: every server address is replaced by an embedded demo backend/)
  })
})
