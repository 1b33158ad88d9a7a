// The loader hooks of loadedModules.mjs: every module URL loaded is posted to the main thread.
let port

export const initialize = (data) => {
  port = data.port
}

export const load = (url, context, next) => {
  port.postMessage(url)
  return next(url, context)
}
