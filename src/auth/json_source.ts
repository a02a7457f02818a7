/**
 * json_source: a strict JSON reader that keeps where each value stands (line and column), so a
 * users file's syntax errors and its wrong values are reported as `users.json:12:7: …` instead of
 * the runtime's "JSON Parse error: Unexpected token ]" with no position.
 *
 * Not here: what the values mean (users_file.ts). Strict JSON (RFC 8259): no comments, no trailing
 * commas; a leading UTF-8 byte order mark is skipped (editors on Windows write one). Nesting is
 * bounded (JSON_DEPTH_MAX): a file of 200,000 `[` is an error at the first one too deep, not a
 * stack overflow. Invariants: lines and columns count from 1; a column counts UTF-16 code units.
 * Pure.
 */

/** How deep objects and lists may nest (a users file needs four levels). */
export const JSON_DEPTH_MAX = 32;

/** A parsed JSON value with the position of its first character. */
export type JsonNode =
  | {
      kind: "object";
      entries: Map<string, JsonNode>;
      keys: JsonKey[];
      line: number;
      column: number;
    }
  | { kind: "array"; items: JsonNode[]; line: number; column: number }
  | { kind: "string"; value: string; line: number; column: number }
  | { kind: "number"; value: number; line: number; column: number }
  | { kind: "boolean"; value: boolean; line: number; column: number }
  | { kind: "null"; line: number; column: number };

/** An object key with its position (for "unknown key" errors). */
export type JsonKey = { name: string; line: number; column: number };

/** A syntax or meaning error at a position. */
export class JsonSourceError extends Error {
  constructor(
    readonly reason: string,
    readonly line: number,
    readonly column: number,
  ) {
    super(`${line}:${column}: ${reason}`);
  }
}

/** Parses `text` as one JSON value; throws JsonSourceError with line and column. */
export function parseJsonSource(text: string): JsonNode {
  const reader = new Reader(text);
  if (text.startsWith("\uFEFF")) reader.at = 1;
  reader.space();
  const node = reader.value();
  reader.space();
  if (reader.at < text.length) reader.fail(`unexpected ${reader.describe()} after the value`);
  return node;
}

class Reader {
  at = 0;
  /** How many objects and lists enclose the value being read. */
  private depth = 0;
  /** Offsets where each line starts (a binary search finds a position's line). */
  private readonly lineStarts: number[] = [0];
  constructor(private readonly text: string) {
    for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1))
      this.lineStarts.push(i + 1);
  }

  value(): JsonNode {
    const { line, column } = this.position(this.at);
    const char = this.text[this.at];
    if (char === "{" || char === "[") {
      if (this.depth >= JSON_DEPTH_MAX)
        this.fail(`objects and lists nest deeper than ${JSON_DEPTH_MAX} levels`);
      this.depth++;
      const node = char === "{" ? this.object(line, column) : this.array(line, column);
      this.depth--;
      return node;
    }
    if (char === '"') return { kind: "string", value: this.string(), line, column };
    if (char === "-" || (char >= "0" && char <= "9")) return this.number(line, column);
    for (const [word, node] of WORDS) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return { ...node, line, column } as JsonNode;
      }
    }
    return this.fail(`expected a value, found ${this.describe()}`);
  }

  private object(line: number, column: number): JsonNode {
    this.at++;
    const entries = new Map<string, JsonNode>();
    const keys: JsonKey[] = [];
    this.space();
    if (this.text[this.at] === "}") {
      this.at++;
      return { kind: "object", entries, keys, line, column };
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"')
        this.fail(`expected a key in quotes, found ${this.describe()}`);
      const keyAt = this.position(this.at);
      const name = this.string();
      if (entries.has(name)) this.fail(`key "${name}" appears twice`, keyAt);
      this.space();
      this.expect(":");
      this.space();
      entries.set(name, this.value());
      keys.push({ name, ...keyAt });
      this.space();
      if (this.text[this.at] === ",") {
        this.at++;
        continue;
      }
      this.expect("}");
      return { kind: "object", entries, keys, line, column };
    }
  }

  private array(line: number, column: number): JsonNode {
    this.at++;
    const items: JsonNode[] = [];
    this.space();
    if (this.text[this.at] === "]") {
      this.at++;
      return { kind: "array", items, line, column };
    }
    for (;;) {
      this.space();
      items.push(this.value());
      this.space();
      if (this.text[this.at] === ",") {
        this.at++;
        continue;
      }
      this.expect("]");
      return { kind: "array", items, line, column };
    }
  }

  private string(): string {
    const start = this.at;
    this.at++;
    for (;;) {
      const char = this.text[this.at];
      if (char === undefined) this.fail("a string is not closed", this.position(start));
      if (char === '"') break;
      if (char < " ") this.fail("a control character inside a string (write it escaped)");
      if (char === "\\") {
        const escaped = this.text[this.at + 1];
        if (escaped === "u" && !/^[0-9a-fA-F]{4}$/.test(this.text.slice(this.at + 2, this.at + 6)))
          this.fail("\\u must be followed by four hex digits");
        else if (escaped !== "u" && !'"\\/bfnrt'.includes(escaped ?? "x"))
          this.fail(`unknown escape \\${escaped ?? ""}`);
        this.at += escaped === "u" ? 6 : 2;
        continue;
      }
      this.at++;
    }
    this.at++;
    return JSON.parse(this.text.slice(start, this.at)) as string;
  }

  private number(line: number, column: number): JsonNode {
    const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(this.text.slice(this.at));
    if (match === null) this.fail(`expected a number, found ${this.describe()}`);
    this.at += (match as RegExpExecArray)[0].length;
    return { kind: "number", value: Number((match as RegExpExecArray)[0]), line, column };
  }

  space(): void {
    while (this.at < this.text.length && " \t\r\n".includes(this.text[this.at])) this.at++;
  }

  private expect(char: string): void {
    if (this.text[this.at] !== char) this.fail(`expected "${char}", found ${this.describe()}`);
    this.at++;
  }

  describe(): string {
    const char = this.text[this.at];
    return char === undefined ? "the end of the file" : JSON.stringify(char);
  }

  fail(reason: string, at = this.position(this.at)): never {
    throw new JsonSourceError(reason, at.line, at.column);
  }

  private position(offset: number): { line: number; column: number } {
    let low = 0;
    let high = this.lineStarts.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if (this.lineStarts[middle] <= offset) low = middle;
      else high = middle - 1;
    }
    return { line: low + 1, column: offset - this.lineStarts[low] + 1 };
  }
}

const WORDS: [string, Partial<JsonNode>][] = [
  ["true", { kind: "boolean", value: true }],
  ["false", { kind: "boolean", value: false }],
  ["null", { kind: "null" }],
];
