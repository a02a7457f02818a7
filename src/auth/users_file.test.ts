/**
 * The users file: syntax and meaning errors name their line and column; a good file gives users
 * with their permissions; what `aria users` writes reads back the same.
 */
import { describe, expect, test } from "bun:test";
import { TopicTable } from "../topic/mod.ts";
import { formatUsersFile, parseUsersFile, type UsersParse } from "./users_file.ts";

const HASH = "scrypt$16384$8$1$c2FsdA==$aGFzaA==";
const options = {
  tokenHashProblem: (stored: string) => (stored.startsWith("scrypt$") ? null : "not a hash"),
};
const parse = (text: string): UsersParse => parseUsersFile(text, options);
const errorOf = (text: string): string => {
  const parsed = parse(text);
  if (parsed.ok) throw new Error("expected an error");
  return parsed.error;
};

describe("syntax errors name line and column", () => {
  test("a missing value", () => {
    expect(errorOf('{"users": [\n  {"name": "a",\n   "tokenHash": ]}')).toBe(
      '3:17: expected a value, found "]"',
    );
  });
  test("a trailing comma", () => {
    expect(errorOf('{"users": [\n  {"name": "a"},\n]}')).toBe('3:1: expected a value, found "]"');
  });
  test("an unclosed string, at its start", () => {
    expect(errorOf('{"users": [\n  {"name": "a}]}')).toBe("2:12: a string is not closed");
  });
  test("the end of the file", () => {
    expect(errorOf('{"users": [')).toBe("1:12: expected a value, found the end of the file");
  });
  test("text after the value", () => {
    expect(errorOf('{"users": []}\nx')).toBe('2:1: unexpected "x" after the value');
  });
  test("nesting 200,000 deep is an error at the first level too deep, not a stack overflow", () => {
    expect(errorOf(`{"users":${"[".repeat(200_000)}`)).toBe(
      "1:41: objects and lists nest deeper than 32 levels",
    );
    expect(errorOf(`{"users":\n ${'[{"a":'.repeat(100_000)}`)).toMatch(
      /^2:\d+: objects and lists nest deeper than 32 levels$/,
    );
  });
});

test("a control character in a subject or a filter is an error (it forged list lines)", () => {
  expect(errorOf('{"users": [{"name": "a",\n "certSubject": "CN=a\\nb (admin): token"}]}')).toBe(
    '2:17: "certSubject" holds a control character ("CN=a\\nb (admin): token")',
  );
  const filter = `{"users": [{"name": "a", "tokenHash": "${HASH}",
    "publish": {"allow": ["a\\u0085"]}}]}`;
  expect(errorOf(filter)).toMatch(/^2:\d+: each of "publish".allow holds a control character/);
});

test("a leading UTF-8 byte order mark is skipped; one elsewhere is an error", () => {
  const text = '{"users": [{"name": "a", "certSubject": "CN=a"}]}';
  const parsed = parse(`\uFEFF${text}`);
  expect(parsed.ok && parsed.users.map((user) => user.name)).toEqual(["a"]);
  expect(errorOf(` \uFEFF${text}`)).toBe('1:2: expected a value, found "\uFEFF"');
});

describe("meaning errors name line and column", () => {
  test("an unknown key is an error, not ignored", () => {
    const text = `{"users": [{"name": "a", "tokenHash": "${HASH}",\n  "publsh": {"allow": ["x"]}}]}`;
    expect(errorOf(text)).toBe(
      '2:3: unknown key "publsh" in a user (known: name, tokenHash, certSubject, publish, subscribe, roles)',
    );
  });
  test("a bad filter", () => {
    const text = `{"users": [{"name": "a", "tokenHash": "${HASH}",\n  "subscribe": {"allow": ["ok/**", "app/#"]}}]}`;
    expect(errorOf(text)).toMatch(/^2:36: "subscribe".allow: filter entry "app\/#": /);
  });
  test("no credential", () => {
    expect(errorOf('{"users": [\n  {"name": "a"}]}')).toBe(
      '2:3: user "a" needs a "tokenHash" or a "certSubject" to sign in with',
    );
  });
  test("a bad hash, an unknown role, a name twice", () => {
    expect(errorOf('{"users": [{"name": "a", "tokenHash": "x"}]}')).toBe(
      '1:39: "tokenHash": not a hash',
    );
    expect(
      errorOf(`{"users": [{"name": "a", "tokenHash": "${HASH}", "roles": ["root"]}]}`),
    ).toMatch(/^1:\d+: unknown role "root" \(roles: admin\)$/);
    expect(
      errorOf(
        `{"users": [{"name": "a", "certSubject": "CN=a"},\n {"name": "a", "certSubject": "CN=b"}]}`,
      ),
    ).toBe('2:2: user "a" appears twice');
  });
});

test("a good file gives users with permissions and roles", () => {
  const parsed = parse(
    JSON.stringify({
      users: [
        {
          name: "orders",
          tokenHash: HASH,
          publish: { allow: ["app/orders/**"], deny: ["app/orders/audit/**"] },
          subscribe: { allow: ["app/**"] },
        },
        { name: "ops", certSubject: "CN=ops,O=Example", roles: ["admin"] },
      ],
    }),
  );
  if (!parsed.ok) throw new Error(parsed.error);
  const [orders, ops] = parsed.users;
  const topics = new TopicTable();
  expect(orders.admin).toBe(false);
  expect(ops.admin).toBe(true);
  expect(orders.permissions.mayPublish("app/orders/eu", topics)).toBe(true);
  expect(orders.permissions.mayPublish("app/orders/audit/x", topics)).toBe(false);
  expect(ops.permissions.mayPublish("app/orders/eu", topics)).toBe(false);
  // What `aria users` writes reads back as the same records.
  const again = parse(formatUsersFile(parsed.users.map((user) => user.record)));
  if (!again.ok) throw new Error(again.error);
  expect(again.users.map((user) => user.record)).toEqual(parsed.users.map((user) => user.record));
});
