// The live event log: what the event stream brought since sign-in, newest first.
import { fill, h } from "./dom.js"
import { describe, live, subscribe } from "./live.js"

export function render(container) {
  const list = h("ol", { class: "log", reversed: true, "aria-live": "off" })
  container.append(h("h1", { tabindex: -1 }, "Events"), h("p", { class: "muted" }, "Players, servers, health, bans and reloads as they happen (stats ticks are left out)."), list)
  const draw = () => {
    fill(list, 
      live.events.length === 0
        ? h("li", { class: "muted" }, "Nothing yet.")
        : live.events.map((event) =>
            h(
              "li",
              { "data-type": event.type },
              h("time", {}, new Date(event.receivedAt).toLocaleTimeString()),
              " ",
              h("span", { class: `tag tag-${event.type.split(".")[0]}` }, event.type),
              " ",
              describe(event)
            )
          )
    )
  }
  draw()
  return subscribe((event) => {
    if (event.type !== "stats" && event.type !== "connection") draw()
  })
}
