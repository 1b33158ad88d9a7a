/** The Prometheus text of a scrape: what Prometheus refuses must not come out of it. */
import { resourceFromAttributes } from "@opentelemetry/resources"
import { MeterProvider } from "@opentelemetry/sdk-metrics"
import { describe, expect, it } from "vitest"
import { ScrapeReader } from "../../../src/services/telemetry/prometheus.js"

describe("ScrapeReader", () => {
  it("gives target_info label names Prometheus takes, a resource attribute starting with a digit included", async () => {
    const scrape = new ScrapeReader([])
    const provider = new MeterProvider({
      resource: resourceFromAttributes({ "service.name": "proxy", "9lives": "v2", "my-key": 'a "quoted" \\ value' }),
      readers: [scrape]
    })
    provider.getMeter("portal").createCounter("portal.test").add(3)
    const text = await scrape.scrape()
    const info = text.split("\n").find((line) => line.startsWith("target_info{"))!
    expect(info).toContain('_9lives="v2"')
    expect(info).toContain('my_key="a \\"quoted\\" \\\\ value"')
    // Every label name in the text is one Prometheus accepts.
    for (const [, labels] of text.matchAll(/^[a-zA-Z_:][a-zA-Z0-9_:]*\{(.*)\} /gm)) {
      for (const [, name] of labels!.matchAll(/([^=,]+)="(?:[^"\\]|\\.)*"/g)) expect(name).toMatch(/^[a-zA-Z_][a-zA-Z0-9_]*$/)
    }
    expect(text).toMatch(/^portal_test_total 3$/m)
    await provider.shutdown()
  })
})
