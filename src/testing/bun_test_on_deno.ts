/**
 * bun_test_on_deno: the part of `bun:test` the pure-core tests use, over `Deno.test`, so
 * `deno task test-core` runs the same test files under Deno with no copy of them (deno.json maps
 * the specifier `bun:test` here). JSR's @std/expect is not reachable from this environment, so
 * `expect` is written out: the matchers those files call, with Bun's semantics —
 * `toEqual` ignores undefined properties and compares typed arrays, Maps and Sets by content;
 * `toMatchInlineSnapshot` prints the value the way Bun writes inline snapshots (pretty-format:
 * keys sorted, strings quoted unescaped, trailing commas) and compares it with the snapshot after
 * removing the template's indentation. It never writes snapshots: a missing one fails.
 *
 * Not supported (throws, so a test using it fails loudly instead of passing): hooks, mocks,
 * `toMatchSnapshot`, asymmetric matchers. Never imported under Bun.
 */

type TestBody = () => void | Promise<void>;

const describing: string[] = [];

/** Registers a test; Bun's third argument (a timeout or options) is ignored. */
export function test(name: string, body: TestBody, _timeoutOrOptions?: unknown): void {
  const fullName = [...describing, name].join(" > ");
  // Timers and sockets of the code under test may outlive a test by design (bounded caches, unref'd timers).
  Deno.test({ name: fullName, fn: body, sanitizeOps: false, sanitizeResources: false });
}
test.skip = (name: string, _body: TestBody): void => {
  Deno.test({ name: [...describing, name].join(" > "), fn: () => {}, ignore: true });
};
export const it = test;

/** Groups tests under a name prefix (registration is synchronous, as in Bun). */
export function describe(name: string, body: () => void): void {
  describing.push(name);
  try {
    body();
  } finally {
    describing.pop();
  }
}
/** One describe per row; `%s`-style placeholders in the title take the row's values in order. */
describe.each =
  <Row extends readonly unknown[]>(rows: readonly Row[]) =>
  (title: string, body: (...row: Row) => void): void => {
    for (const row of rows) {
      let next = 0;
      const name = title.replace(/%[sdipjo]/g, () => {
        const value = row[next++];
        return typeof value === "string" ? value : show(value);
      });
      describe(name, () => body(...row));
    }
  };

function unsupported(name: string): never {
  throw new Error(`bun:test's ${name} is not supported by src/testing/bun_test_on_deno.ts`);
}
export const beforeAll = (): never => unsupported("beforeAll");
export const afterAll = (): never => unsupported("afterAll");
export const beforeEach = (): never => unsupported("beforeEach");
export const afterEach = (): never => unsupported("afterEach");

// ---- expect -------------------------------------------------------------------------------------

class ExpectError extends Error {
  override name = "ExpectError";
}

/** The matchers of one `expect(actual)`; `.not` negates every one. */
export interface Matchers {
  not: Matchers;
  /** The matchers, applied to what the promise `actual` rejects with (it must reject). */
  rejects: AsyncMatchers;
  /** The matchers, applied to what the promise `actual` resolves to (it must resolve). */
  resolves: AsyncMatchers;
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toStrictEqual(expected: unknown): void;
  toMatchObject(expected: object): void;
  toBeNull(): void;
  toBeUndefined(): void;
  toBeDefined(): void;
  toBeNaN(): void;
  toBeTruthy(): void;
  toBeFalsy(): void;
  toBeGreaterThan(bound: number): void;
  toBeGreaterThanOrEqual(bound: number): void;
  toBeLessThan(bound: number): void;
  toBeLessThanOrEqual(bound: number): void;
  toBeCloseTo(expected: number, digits?: number): void;
  toContain(item: unknown): void;
  toHaveLength(length: number): void;
  toMatch(pattern: RegExp | string): void;
  toStartWith(prefix: string): void;
  toEndWith(suffix: string): void;
  toThrow(expected?: RegExp | string | (new (...args: never[]) => Error)): void;
  toMatchInlineSnapshot(snapshot?: string): void;
}

/** The matchers of `.rejects` / `.resolves`: each awaits the promise first. */
export type AsyncMatchers = {
  [K in Exclude<keyof Matchers, "not" | "rejects" | "resolves">]: (
    ...args: Parameters<Matchers[K]>
  ) => Promise<void>;
};

const MATCHER_NAMES = [
  "toBe",
  "toEqual",
  "toStrictEqual",
  "toMatchObject",
  "toBeNull",
  "toBeUndefined",
  "toBeDefined",
  "toBeNaN",
  "toBeTruthy",
  "toBeFalsy",
  "toBeGreaterThan",
  "toBeGreaterThanOrEqual",
  "toBeLessThan",
  "toBeLessThanOrEqual",
  "toBeCloseTo",
  "toContain",
  "toHaveLength",
  "toMatch",
  "toStartWith",
  "toEndWith",
  "toThrow",
  "toMatchInlineSnapshot",
] as const;

function settled(promise: unknown, negated: boolean, want: "rejects" | "resolves"): AsyncMatchers {
  const entries = MATCHER_NAMES.map((name) => [
    name,
    async (...args: unknown[]) => {
      let outcome: unknown;
      let rejected = false;
      try {
        outcome = await promise;
      } catch (error) {
        rejected = true;
        outcome = error;
      }
      if (rejected !== (want === "rejects"))
        throw new ExpectError(
          `expect(promise).${want}: it ${rejected ? `rejected with ${show(outcome)}` : `resolved to ${show(outcome)}`}`,
        );
      // toThrow on a rejection reason checks the reason itself, as Bun does.
      const subject =
        name === "toThrow"
          ? () => {
              throw outcome;
            }
          : outcome;
      (matchers(subject, negated)[name] as (...values: unknown[]) => void)(...args);
    },
  ]);
  return Object.fromEntries(entries) as AsyncMatchers;
}

/** Bun's `expect`, for the matchers above. */
export function expect(actual: unknown): Matchers {
  return matchers(actual, false);
}

function matchers(actual: unknown, negated: boolean): Matchers {
  const check = (pass: boolean, what: string) => {
    if (pass === negated)
      throw new ExpectError(`expect(${show(actual)}).${negated ? "not." : ""}${what}`);
  };
  const self: Matchers = {
    get not() {
      return matchers(actual, !negated);
    },
    get rejects() {
      return settled(actual, negated, "rejects");
    },
    get resolves() {
      return settled(actual, negated, "resolves");
    },
    toBe: (expected) => check(Object.is(actual, expected), `toBe(${show(expected)})`),
    toEqual: (expected) => check(equals(actual, expected, false), `toEqual(${show(expected)})`),
    toStrictEqual: (expected) =>
      check(equals(actual, expected, true), `toStrictEqual(${show(expected)})`),
    toMatchObject: (expected) =>
      check(matchesObject(actual, expected), `toMatchObject(${show(expected)})`),
    toBeNull: () => check(actual === null, "toBeNull()"),
    toBeUndefined: () => check(actual === undefined, "toBeUndefined()"),
    toBeDefined: () => check(actual !== undefined, "toBeDefined()"),
    toBeNaN: () => check(typeof actual === "number" && Number.isNaN(actual), "toBeNaN()"),
    toBeTruthy: () => check(Boolean(actual), "toBeTruthy()"),
    toBeFalsy: () => check(!actual, "toBeFalsy()"),
    toBeGreaterThan: (bound) => check((actual as number) > bound, `toBeGreaterThan(${bound})`),
    toBeGreaterThanOrEqual: (bound) =>
      check((actual as number) >= bound, `toBeGreaterThanOrEqual(${bound})`),
    toBeLessThan: (bound) => check((actual as number) < bound, `toBeLessThan(${bound})`),
    toBeLessThanOrEqual: (bound) =>
      check((actual as number) <= bound, `toBeLessThanOrEqual(${bound})`),
    toBeCloseTo: (expected, digits = 2) =>
      check(
        Math.abs((actual as number) - expected) < 10 ** -digits / 2,
        `toBeCloseTo(${expected}, ${digits})`,
      ),
    toContain: (item) => {
      const pass =
        typeof actual === "string"
          ? actual.includes(item as string)
          : [...(actual as Iterable<unknown>)].some((element) => Object.is(element, item));
      check(pass, `toContain(${show(item)})`);
    },
    toHaveLength: (length) =>
      check((actual as { length: number }).length === length, `toHaveLength(${length})`),
    toMatch: (pattern) =>
      check(
        typeof actual === "string" &&
          (typeof pattern === "string" ? actual.includes(pattern) : pattern.test(actual)),
        `toMatch(${String(pattern)})`,
      ),
    toStartWith: (prefix) =>
      check(
        typeof actual === "string" && actual.startsWith(prefix),
        `toStartWith(${show(prefix)})`,
      ),
    toEndWith: (suffix) =>
      check(typeof actual === "string" && actual.endsWith(suffix), `toEndWith(${show(suffix)})`),
    toThrow: (expected) => {
      let thrown: unknown;
      let threw = false;
      try {
        (actual as () => unknown)();
      } catch (error) {
        threw = true;
        thrown = error;
      }
      const message = thrown instanceof Error ? thrown.message : String(thrown);
      let pass = threw;
      if (threw && expected !== undefined) {
        if (typeof expected === "string") pass = message.includes(expected);
        else if (expected instanceof RegExp) pass = expected.test(message);
        else pass = thrown instanceof expected;
      }
      check(
        pass,
        `toThrow(${expected === undefined ? "" : String(expected)}) — threw ${threw ? show(message) : "nothing"}`,
      );
    },
    toMatchInlineSnapshot: (snapshot) => {
      if (snapshot === undefined)
        throw new ExpectError(
          "toMatchInlineSnapshot() without a snapshot: write it with `bun test -u`",
        );
      const printed = prettyFormat(actual, "");
      const wanted = stripIndentation(snapshot);
      if ((printed === wanted) === negated)
        throw new ExpectError(
          `inline snapshot mismatch\n--- snapshot\n${wanted}\n+++ received\n${printed}`,
        );
    },
  };
  return self;
}

function show(value: unknown): string {
  const text = prettyFormat(value, "");
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

// ---- Equality (Bun's toEqual / toStrictEqual) -----------------------------------------------------

function equals(a: unknown, b: unknown, strict: boolean): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (strict && Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (a instanceof Date || b instanceof Date)
    return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
  if (a instanceof RegExp || b instanceof RegExp) return String(a) === String(b);
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b) || a.constructor !== b.constructor)
      return false;
    const left = a as unknown as ArrayLike<unknown>;
    const right = b as unknown as ArrayLike<unknown>;
    if (left.length !== right.length) return false;
    for (let i = 0; i < left.length; i++) if (!Object.is(left[i], right[i])) return false;
    return true;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    // A loop, not every(): property tests compare long arrays many times.
    for (let i = 0; i < a.length; i++) {
      const left = a[i];
      const right = b[i];
      if (Object.is(left, right)) continue;
      if (typeof left !== "object" || typeof right !== "object" || !equals(left, right, strict))
        return false;
    }
    return true;
  }
  if (a instanceof Map || b instanceof Map) {
    if (!(a instanceof Map) || !(b instanceof Map) || a.size !== b.size) return false;
    for (const [key, value] of a)
      if (!b.has(key) || !equals(value, b.get(key), strict)) return false;
    return true;
  }
  if (a instanceof Set || b instanceof Set) {
    if (!(a instanceof Set) || !(b instanceof Set) || a.size !== b.size) return false;
    for (const value of a)
      if (!b.has(value) && ![...b].some((other) => equals(value, other, strict))) return false;
    return true;
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = (object: Record<string, unknown>) =>
    Object.keys(object).filter((key) => strict || object[key] !== undefined);
  const leftKeys = keys(left);
  const rightKeys = keys(right);
  if (leftKeys.length !== rightKeys.length) return false;
  return leftKeys.every(
    (key) => Object.hasOwn(right, key) && equals(left[key], right[key], strict),
  );
}

function matchesObject(actual: unknown, expected: unknown): boolean {
  if (typeof expected !== "object" || expected === null) return equals(actual, expected, false);
  if (typeof actual !== "object" || actual === null) return false;
  if (Array.isArray(expected))
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((item, i) => matchesObject(actual[i], item))
    );
  return Object.entries(expected).every(
    ([key, value]) =>
      key in actual && matchesObject((actual as Record<string, unknown>)[key], value),
  );
}

// ---- Inline snapshots -----------------------------------------------------------------------------

/** Prints `value` as Bun writes it into an inline snapshot (Jest's pretty-format, 2-space indent). */
function prettyFormat(value: unknown, indent: string): string {
  const inner = `${indent}  `;
  const block = (open: string, close: string, items: string[]) =>
    items.length === 0
      ? `${open}${close}`
      : `${open}\n${items.map((item) => `${inner}${item},\n`).join("")}${indent}${close}`;
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  if (typeof value === "string") return `"${value}"`;
  if (typeof value === "number") return Object.is(value, -0) ? "-0" : String(value);
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "boolean") return String(value);
  if (typeof value === "symbol") return value.toString();
  if (typeof value === "function") return `[Function${value.name === "" ? "" : ` ${value.name}`}]`;
  if (value instanceof Date) return value.toISOString();
  if (value instanceof RegExp) return String(value);
  if (value instanceof Error) return `[${value.name}: ${value.message}]`;
  if (Array.isArray(value))
    return block(
      "[",
      "]",
      value.map((item) => prettyFormat(item, inner)),
    );
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    return block(
      `${value.constructor.name} [`,
      "]",
      Array.from(value as unknown as ArrayLike<unknown>, (item) => prettyFormat(item, inner)),
    );
  }
  if (value instanceof Map)
    return block(
      "Map {",
      "}",
      [...value].map(
        ([key, item]) => `${prettyFormat(key, inner)} => ${prettyFormat(item, inner)}`,
      ),
    );
  if (value instanceof Set)
    return block(
      "Set {",
      "}",
      [...value].map((item) => prettyFormat(item, inner)),
    );
  const object = value as Record<string, unknown>;
  const prototype = Object.getPrototypeOf(object);
  const prefix =
    prototype === null || prototype === Object.prototype
      ? ""
      : `${prototype.constructor?.name ?? "Object"} `;
  const keys = Object.keys(object).sort();
  return block(
    `${prefix}{`,
    "}",
    keys.map((key) => `"${key}": ${prettyFormat(object[key], inner)}`),
  );
}

/** The snapshot without the template literal's indentation (Jest's stripAddedIndentation). */
function stripIndentation(snapshot: string): string {
  const lines = snapshot.split("\n");
  if (lines.length < 3 || lines[0].trim() !== "" || lines[lines.length - 1].trim() !== "")
    return snapshot;
  const indentation = /^\s*/.exec(lines[1])?.[0] ?? "";
  const body = lines.slice(1, -1);
  if (!body.every((line) => line === "" || line.startsWith(indentation))) return snapshot;
  return body.map((line) => line.slice(indentation.length)).join("\n");
}
