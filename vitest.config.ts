import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // End-to-end files start real processes and sockets; two at a time fits a 2-core machine.
    maxWorkers: 2,
    minWorkers: 1
  }
})
