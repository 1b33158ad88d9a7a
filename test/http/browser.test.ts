/**
 * The web UI in a real browser: Debian's chromium driven by playwright-core, against Portal with real minecraft-protocol
 * peers. Sign in (keyboard only), see a connected player, kick them, add and lift a ban, edit a server with a typo and
 * see the problem, fix it and see the server change. Screenshots are kept under test-artifacts/browser/; with
 * PORTAL_UPDATE_SCREENSHOTS=1 the dashboard's also replaces docs/images/dashboard.png.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { afterEach, describe, expect, it } from "vitest"
import { waitFor } from "../helpers/wait.js"
import { API_KEY, startWebPortal } from "../helpers/web.js"
import { join, startBackend } from "../peers/minecraft.js"

const CHROMIUM = "/usr/bin/chromium"
const ARTIFACTS = path.resolve("test-artifacts/browser")
const available = existsSync(CHROMIUM)
if (!available) console.warn(`browser test skipped: ${CHROMIUM} is missing (install Debian's chromium package; .ci/run does)`)

const contexts: Array<{ context: BrowserContext; dir: string }> = []
afterEach(async () => {
  for (const { context, dir } of contexts.splice(0)) {
    await context.close().catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  }
})

const launch = async (): Promise<Page> => {
  const dir = mkdtempSync(path.join(tmpdir(), "portal-chromium-"))
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 860 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })
  contexts.push({ context, dir })
  return context.pages()[0] ?? (await context.newPage())
}

const shoot = async (page: Page, name: string) => {
  mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true })
}

describe.skipIf(!available)("web UI in chromium", () => {
  it("sign in, see a real player, kick them, ban and unban, fix a server with a typo and see it change", async () => {
    const backend = await startBackend("main", { hold: true })
    const other = await startBackend("other", { hold: true })
    const web = await startWebPortal({
      web: `[web.rate_limit]\nrequests_per_minute = 600`,
      servers: { "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\n` }
    })
    const page = await launch()
    const problems: Array<string> = []
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(message.text())
    })
    page.on("pageerror", (error) => problems.push(error.message))

    // The page's own headers: a CSP without inline script, no framing, no sniffing, no referrer.
    const response = await page.goto(`${web.base}/`)
    expect(response!.headers()["content-security-policy"]).toMatch(/script-src 'self'/)
    expect(response!.headers()["content-security-policy"]).not.toMatch(/unsafe-inline/)
    expect(response!.headers()["x-frame-options"]).toBe("DENY")
    expect(response!.headers()["x-content-type-options"]).toBe("nosniff")
    expect(response!.headers()["referrer-policy"]).toBe("no-referrer")

    // Sign in with the keyboard alone: a wrong key first.
    await page.locator("#api-key").waitFor()
    await page.keyboard.type("not-the-key-0123456789")
    await page.keyboard.press("Enter")
    await page.getByText("That key was not accepted.").waitFor()
    await page.keyboard.press("Control+A")
    await page.keyboard.type(API_KEY)
    await page.keyboard.press("Enter")
    await page.getByRole("heading", { name: "Dashboard" }).waitFor()
    expect(await page.evaluate('sessionStorage.getItem("portal.apiKey")')).toBe(API_KEY)
    expect(await page.evaluate("localStorage.length")).toBe(0)
    expect(page.url()).not.toContain(API_KEY)

    // A real player connects: the dashboard counts them from the live stream, and the charts fill in.
    const steve = await join(web.portal.port, "mc.example.com", { username: "Steve" })
    expect(steve._tag).toBe("Joined")
    await page.locator('[data-testid="players-online"]', { hasText: /^1$/ }).waitFor({ timeout: 6000 })
    await page.locator("figure.chart").first().waitFor({ timeout: 8000 })
    await page.getByText("● live").waitFor()
    await shoot(page, "dashboard")
    if (process.env.PORTAL_UPDATE_SCREENSHOTS === "1") {
      // For the docs: a few more players and ticks, so that the charts have a shape.
      for (const name of ["Alex", "Notch", "Jeb"]) {
        await join(web.portal.port, "mc.example.com", { username: name })
        await new Promise((resolve) => setTimeout(resolve, 2500))
      }
      await new Promise((resolve) => setTimeout(resolve, 4500))
      await page.screenshot({ path: path.resolve("docs/images/dashboard.png"), fullPage: true })
      throw new Error("docs/images/dashboard.png written; run again without PORTAL_UPDATE_SCREENSHOTS")
    }
    await page.emulateMedia({ colorScheme: "dark" })
    await shoot(page, "dashboard-dark")
    await page.emulateMedia({ colorScheme: "light" })

    // Players: the player is listed; kick them with a reason.
    await page.getByRole("link", { name: "Players" }).click()
    const row = page.locator('tr[data-player="Steve"]')
    await row.waitFor()
    expect(await row.textContent()).toContain("main")
    await shoot(page, "players")
    await page.getByRole("button", { name: "Kick Steve" }).click()
    await page.locator("#kick-reason").fill("Time for a break")
    await page.getByRole("dialog").getByRole("button", { name: "Kick" }).click()
    await page.getByText("Kicked Steve (1 session)").waitFor()
    await waitFor(() => backend.players.size === 0, { what: "Steve to leave the backend" })
    await web.portal.waitForLog(/Steve .*left main .*\(ended: Time for a break;/)
    await page.getByText("Nobody is online.").waitFor()
    // The list was rebuilt without the Kick button: the focus is on the page's heading, not lost to the body.
    expect(await page.evaluate("document.activeElement?.tagName + ' ' + document.activeElement?.textContent")).toBe("H1 Players")

    // Bans: add one with a duration, see it, lift it.
    await page.getByRole("link", { name: "Bans" }).click()
    await page.locator("#ban-value").fill("Griefer")
    await page.locator("#ban-reason").fill("griefing the spawn")
    await page.locator("#ban-duration").fill("2h")
    await page.getByRole("button", { name: "Ban", exact: true }).click()
    await page.locator('tr[data-ban="Griefer"]').waitFor()
    expect(await page.locator('tr[data-ban="Griefer"]').textContent()).toContain("griefing the spawn")
    expect(((await (await web.request("/api/v1/bans/check?username=Griefer")).json()) as { banned: boolean }).banned).toBe(true)
    await shoot(page, "bans")
    await page.getByRole("button", { name: "Lift the ban of Griefer" }).click()
    await page.getByText("No bans in force.").waitFor()
    expect(await page.evaluate("document.activeElement?.tagName")).not.toBe("BODY")
    expect(((await (await web.request("/api/v1/bans/check?username=Griefer")).json()) as { banned: boolean }).banned).toBe(false)

    // Servers: a typo is shown beside the editor and nothing changes; the fix is applied.
    await page.getByRole("link", { name: "Servers" }).click()
    await page.getByRole("button", { name: "Edit main" }).click()
    const editor = page.locator("#server-toml")
    await waitFor(async () => ((await editor.inputValue()).includes("addresses") ? true : undefined), { what: "the server file in the editor" })
    await editor.fill(`domains = ["mc.example.com"]\nadresses = ["127.0.0.1:${other.port}"]\n`)
    await page.getByRole("button", { name: "Save" }).click()
    const problemsBox = page.locator("#server-problems")
    await problemsBox.getByText(/did you mean "addresses"/).waitFor()
    expect(await problemsBox.textContent()).toContain("adresses")
    await shoot(page, "server-typo")
    expect(await (await web.request("/api/v1/servers/main/config")).text()).toContain(`127.0.0.1:${backend.port}`)
    await editor.fill(`domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${other.port}"]\n`)
    await page.getByRole("button", { name: "Save" }).click()
    await page.getByText("main saved").waitFor()
    await page.locator('tr[data-server="main"]', { hasText: `127.0.0.1:${other.port}` }).waitFor()
    const alex = await join(web.portal.port, "mc.example.com", { username: "Alex" })
    expect(alex._tag).toBe("Joined")
    expect(other.logins).toBe(1)
    await shoot(page, "servers")

    // The event log has seen it all, in order.
    await page.getByRole("link", { name: "Events" }).click()
    await waitFor(async () => ((await page.locator('li[data-type="player.join"]').count()) === 2 ? true : undefined), { what: "Alex's join in the log" })
    const types = await page.locator("ol.log li").evaluateAll((items) => items.map((item) => item.getAttribute("data-type")))
    expect(types.reverse().filter((type) => type !== "config.reload")).toEqual(["player.join", "player.leave", "ban.created", "ban.removed", "player.join"])
    await shoot(page, "events")

    // Signing out forgets the key.
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.locator("#api-key").waitFor()
    expect(await page.evaluate('sessionStorage.getItem("portal.apiKey")')).toBeNull()
    // No script error and no CSP violation; the refused requests above (a wrong key, the typo) are the only failures.
    expect(problems.filter((text) => !/Failed to load resource: the server responded with a status of 40[01]/.test(text))).toEqual([])
  }, 60_000)

  it("new server over an existing id, a syntax error's place, the skip link, narrow windows, a refused key, a failed load", async () => {
    const mainFile = `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:1"]\n`
    const web = await startWebPortal({ web: `[web.rate_limit]\nrequests_per_minute = 600`, servers: { "main.toml": mainFile } })
    const page = await launch()
    await page.goto(`${web.base}/`)
    await page.locator("#api-key").fill(API_KEY)
    await page.keyboard.press("Enter")
    await page.getByRole("heading", { name: "Dashboard" }).waitFor()

    // "New server" under the id of one that exists: refused at Check and at Save, and its file is left as it was.
    await page.getByRole("link", { name: "Servers" }).click()
    await page.getByRole("button", { name: "New server" }).click()
    await page.locator("#server-id").fill("main")
    await page.getByRole("button", { name: "Check" }).click()
    const problemsBox = page.locator("#server-problems")
    await problemsBox.getByText(/a server "main" exists already/).waitFor()
    await page.getByRole("button", { name: "Save" }).click()
    await problemsBox.getByText(/a server "main" exists already/).waitFor()
    expect(await (await web.request("/api/v1/servers/main/config")).text()).toBe(mainFile)

    // A TOML syntax error says where it is.
    await page.locator("#server-id").fill("fresh")
    await page.locator("#server-toml").fill(`domains = ["a.example.com"\naddresses = ["127.0.0.1:2"]\n`)
    await page.getByRole("button", { name: "Check" }).click()
    await problemsBox.locator("code", { hasText: /^line \d+, column \d+$/ }).waitFor()

    // The skip link moves the focus to the content and leaves the page where it is.
    await page.getByRole("button", { name: "Cancel" }).click()
    await page.locator("a.skip").focus()
    await page.keyboard.press("Enter")
    await page.getByRole("heading", { name: "Servers" }).waitFor()
    expect(await page.locator('nav a[aria-current="page"]').textContent()).toBe("Servers")

    // A narrow window: the page does not get wider than it; a wide table scrolls in its own box.
    await page.setViewportSize({ width: 400, height: 800 })
    await page.locator('tr[data-server="main"]').waitFor()
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(400)
    await page.setViewportSize({ width: 1280, height: 860 })

    // A load that fails (here a rate limit, answered on the way) is said and tried again, not shown as no servers.
    await page.route("**/api/v1/servers", (route) => route.fulfill({ status: 429, contentType: "application/json", body: JSON.stringify({ error: { code: "rate_limited", message: "more than 60 requests in a minute" } }) }))
    await page.getByRole("link", { name: "Dashboard" }).click()
    await page.getByRole("alert").getByText(/more than 60 requests in a minute \(trying again\)/).waitFor()
    await page.getByText("● live").waitFor()
    // The alert stays over the stats ticks that redraw the cards.
    await new Promise((resolve) => setTimeout(resolve, 2500))
    expect(await page.getByRole("alert").getByText(/more than 60 requests/).count()).toBe(1)
    await page.unroute("**/api/v1/servers")

    // A key Portal stops accepting: the sign-in form says why, rather than "Signed out."
    await page.evaluate('sessionStorage.setItem("portal.apiKey", "a-key-that-was-changed-0123")')
    await page.getByRole("link", { name: "Players" }).click()
    await page.getByText(/no longer accepts the key this tab signed in with/).waitFor()
  }, 60_000)
})
