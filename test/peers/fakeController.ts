/**
 * A fake server controller with the Crafty Controller API v2 for one server, on a real HTTP server:
 * `GET /api/v2/servers/{id}/stats` and `POST /api/v2/servers/{id}/action/{start_server|stop_server}`.
 * A start sets `waiting_start`, then `running` after `startMs`; a stop keeps `running` for `stopMs`, then stops.
 */
import { type FakeApi, type RecordedRequest, type Reply, startFakeApi } from "./fakeApi.js"

export type ControllerState = "stopped" | "starting" | "running" | "stopping" | "crashed"

export interface FakeController extends FakeApi {
  state: ControllerState
  readonly serverId: string
  readonly apiKey: string
  /** Actions received, in order. */
  readonly actions: Array<string>
}

export const startFakeController = async (
  options: {
    readonly serverId?: string
    readonly apiKey?: string
    readonly state?: ControllerState
    readonly startMs?: number
    readonly stopMs?: number
  } = {}
): Promise<FakeController> => {
  const serverId = options.serverId ?? "7"
  const apiKey = options.apiKey ?? "crafty-token-0123456789"
  const base = `/api/v2/servers/${serverId}`
  let controller: FakeController | undefined
  const handle = (request: RecordedRequest): Reply => {
    const self = controller!
    if (request.method === "GET" && request.path === `${base}/stats`) {
      return {
        status: 200,
        body: {
          status: "ok",
          data: {
            stats_id: 1,
            server_id: serverId,
            running: self.state === "running" || self.state === "stopping",
            crashed: self.state === "crashed",
            waiting_start: self.state === "starting",
            online: 0,
            max: 20
          }
        }
      }
    }
    const action = request.method === "POST" && request.path.startsWith(`${base}/action/`) ? request.path.slice(`${base}/action/`.length) : undefined
    if (action !== undefined) {
      self.actions.push(action)
      if (action === "start_server") {
        if (self.state === "stopped" || self.state === "crashed") {
          self.state = "starting"
          self.after(options.startMs ?? 300, () => {
            if (self.state === "starting") self.state = "running"
          })
        }
        return { status: 200, body: { status: "ok" } }
      }
      if (action === "stop_server") {
        if (self.state === "running") {
          self.state = "stopping"
          self.after(options.stopMs ?? 300, () => {
            if (self.state === "stopping") self.state = "stopped"
          })
        }
        return { status: 200, body: { status: "ok" } }
      }
      return { status: 400, body: { status: "error", error: "NOT_FOUND" } }
    }
    return { status: 404, body: { status: "error", error: "NOT_FOUND" } }
  }
  const api = await startFakeApi({ apiKey, handle })
  controller = Object.assign(api, { state: options.state ?? "stopped", serverId, apiKey, actions: [] as Array<string> })
  return controller
}
