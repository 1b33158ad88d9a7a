/**
 * SecretReader: how Forwarding reads the forwarding secret file. A port of its own on node:fs, so that a worker
 * thread's data plane reads the secret without loading @effect/platform's FileSystem (and effect/Schema, which its
 * errors are made with): about 4 MiB of heap per worker thread.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { readFile } from "node:fs"

export class SecretUnreadable extends Data.TaggedError("SecretUnreadable")<{ readonly reason: string }> {}

export class SecretReader extends Context.Tag("portal/SecretReader")<
  SecretReader,
  { readonly read: (file: string) => Effect.Effect<string, SecretUnreadable> }
>() {
  static readonly layer = Layer.succeed(SecretReader, {
    read: (file) =>
      Effect.async<string, SecretUnreadable>((resume) => {
        readFile(file, "utf8", (error, text) =>
          resume(error === null ? Effect.succeed(text) : Effect.fail(new SecretUnreadable({ reason: error.message })))
        )
      })
  })
}
