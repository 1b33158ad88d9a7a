// The web UI ships as plain files: `npm run build` copies src/http/ui beside the compiled server (dist/http/ui).
import { cpSync, rmSync } from "node:fs"

rmSync("dist/http/ui", { recursive: true, force: true })
cpSync("src/http/ui", "dist/http/ui", { recursive: true })
