/**
 * Splits process output into lines with a bound on line length, so a process that prints megabytes without a
 * newline cannot make Portal buffer them. A line past the bound is cut and marked; the rest of it is dropped.
 */
export const MAX_LINE_LENGTH = 4096
const TRUNCATED = " [line truncated]"

export class LineSplitter {
  private buffer = ""
  private skipping = false

  constructor(private readonly maxLength: number = MAX_LINE_LENGTH) {}

  /** The complete lines that `text` finishes (without their `\n` or `\r\n`). */
  push(text: string): Array<string> {
    const out: Array<string> = []
    let start = 0
    for (;;) {
      const newline = text.indexOf("\n", start)
      if (newline === -1) break
      const piece = text.slice(start, newline)
      start = newline + 1
      if (this.skipping) {
        this.skipping = false
        this.buffer = ""
        continue
      }
      const line = this.buffer + piece
      this.buffer = ""
      out.push(this.cut(line.endsWith("\r") ? line.slice(0, -1) : line))
    }
    if (!this.skipping) {
      this.buffer += text.slice(start)
      if (this.buffer.length > this.maxLength) {
        out.push(this.cut(this.buffer))
        this.buffer = ""
        this.skipping = true
      }
    }
    return out
  }

  /** What is left when the output ends without a final newline. */
  end(): Array<string> {
    const rest = this.skipping ? "" : this.buffer
    this.buffer = ""
    this.skipping = false
    return rest.length > 0 ? [this.cut(rest.endsWith("\r") ? rest.slice(0, -1) : rest)] : []
  }

  private cut(line: string): string {
    return line.length > this.maxLength ? line.slice(0, this.maxLength) + TRUNCATED : line
  }
}
