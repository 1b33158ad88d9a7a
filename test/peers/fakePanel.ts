/**
 * A fake hosting panel with the Pterodactyl client API for one server, on a real HTTP server:
 * `GET /api/client/servers/{id}/resources` and `POST /api/client/servers/{id}/power`. A start moves the server
 * to `starting`, then `running` after `startMs`; a stop to `stopping`, then `offline` after `stopMs`.
 */
import { type FakeApi, type RecordedRequest, type Reply, startFakeApi } from "./fakeApi.js"

export type PanelState = "running" | "starting" | "stopping" | "offline"

export interface FakePanel extends FakeApi {
  state: PanelState
  readonly serverId: string
  readonly apiKey: string
  /** Power signals received, in order. */
  readonly signals: Array<string>
}

export const startFakePanel = async (
  options: { readonly serverId?: string; readonly apiKey?: string; readonly state?: PanelState; readonly startMs?: number; readonly stopMs?: number } = {}
): Promise<FakePanel> => {
  const serverId = options.serverId ?? "a1b2c3d4"
  const apiKey = options.apiKey ?? "ptlc_test_key_0123456789"
  const base = `/api/client/servers/${serverId}`
  let panel: FakePanel | undefined
  const handle = (request: RecordedRequest): Reply => {
    const self = panel!
    if (request.method === "GET" && request.path === `${base}/resources`) {
      return {
        status: 200,
        body: {
          object: "stats",
          attributes: {
            current_state: self.state,
            is_suspended: false,
            resources: { memory_bytes: 0, cpu_absolute: 0, disk_bytes: 0, network_rx_bytes: 0, network_tx_bytes: 0, uptime: 0 }
          }
        }
      }
    }
    if (request.method === "POST" && request.path === `${base}/power`) {
      let signal: unknown
      try {
        signal = (JSON.parse(request.body) as { signal?: unknown }).signal
      } catch {
        return { status: 422, body: { errors: [{ code: "ValidationException" }] } }
      }
      self.signals.push(String(signal))
      if (signal === "start" && self.state === "offline") {
        self.state = "starting"
        self.after(options.startMs ?? 300, () => {
          if (self.state === "starting") self.state = "running"
        })
      } else if (signal === "stop" && (self.state === "running" || self.state === "starting")) {
        self.state = "stopping"
        self.after(options.stopMs ?? 300, () => {
          if (self.state === "stopping") self.state = "offline"
        })
      } else if (signal !== "start" && signal !== "stop" && signal !== "restart" && signal !== "kill") {
        return { status: 422, body: { errors: [{ code: "ValidationException" }] } }
      }
      return { status: 204 }
    }
    return { status: 404, body: { errors: [{ code: "NotFoundHttpException" }] } }
  }
  const api = await startFakeApi({ apiKey, handle })
  panel = Object.assign(api, { state: options.state ?? "offline", serverId, apiKey, signals: [] as Array<string> })
  return panel
}
