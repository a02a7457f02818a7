/**
 * users_file: the users file (`aria serve --users FILE`), JSON, read into users and written back
 * by `aria users`. Every error names the line and column of what is wrong, syntax or meaning:
 *
 *   {"users": [{"name": "orders", "tokenHash": "scrypt$…",
 *               "publish": {"allow": ["app/orders/**"], "deny": ["app/orders/audit/**"]},
 *               "subscribe": {"allow": ["app/orders/**"]}, "roles": []}]}
 *
 * Not here: verifying tokens (the runtime's token_kdf), deciding (permissions.ts, users.ts).
 * Invariants: names are unique; each user has a token hash, a certificate subject or both;
 * unknown keys are errors, never ignored; no text holds a control character (a certificate subject
 * with a newline forged lines of `aria users list`). Pure.
 */
import { Filter } from "../topic/mod.ts";
import { type JsonNode, JsonSourceError, parseJsonSource } from "./json_source.ts";
import { Permissions, type Rule } from "./permissions.ts";

/** Roles a user may hold. */
export const ROLES = ["admin"] as const;
/** A role a user may hold: `admin` may use the admin app's routes. */
export type Role = (typeof ROLES)[number];

/** The filter texts of one action, as written in the file. */
export interface RuleText {
  allow: string[];
  deny: string[];
}

/** One user as the file holds it. */
export interface UserRecord {
  name: string;
  /** The token's salted hash (`scrypt$…`), or null for a certificate-only user. */
  tokenHash: string | null;
  /** The client certificate subject that signs in as this user (mutual TLS), or null. */
  certSubject: string | null;
  publish: RuleText;
  subscribe: RuleText;
  roles: Role[];
}

/** A user ready to decide: its record and its permissions. */
export interface User {
  readonly record: UserRecord;
  readonly name: string;
  readonly permissions: Permissions;
  readonly admin: boolean;
}

/** The result of reading a users file. */
export type UsersParse = { ok: true; users: User[] } | { ok: false; error: string };

/** What parsing needs from outside: whether a stored token hash is readable (token_kdf). */
export interface UsersFileOptions {
  tokenHashProblem(stored: string): string | null;
}

const USER_KEYS = ["name", "tokenHash", "certSubject", "publish", "subscribe", "roles"];
const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is its purpose
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/** Reads a users file's text; an error reads `LINE:COLUMN: reason`. */
export function parseUsersFile(text: string, options: UsersFileOptions): UsersParse {
  try {
    const root = parseJsonSource(text);
    const top = objectOf(root, "the file", ["users"]);
    const list = top.get("users");
    if (list === undefined) fail(root, 'the file must hold {"users": [...]}');
    if (list.kind !== "array") fail(list, '"users" must be a list');
    const users: User[] = [];
    const names = new Set<string>();
    for (const node of list.items) {
      const record = userOf(node, options);
      if (names.has(record.name)) fail(node, `user "${record.name}" appears twice`);
      names.add(record.name);
      users.push(userFromRecord(record));
    }
    return { ok: true, users };
  } catch (error) {
    if (error instanceof JsonSourceError) return { ok: false, error: error.message };
    throw error;
  }
}

/** A user from a record whose filters are valid (parseUsersFile checked them). */
export function userFromRecord(record: UserRecord): User {
  return {
    record,
    name: record.name,
    permissions: new Permissions(ruleOf(record.publish), ruleOf(record.subscribe)),
    admin: record.roles.includes("admin"),
  };
}

/** The file's text for `records` (what `aria users` writes). */
export function formatUsersFile(records: readonly UserRecord[]): string {
  const users = records.map((record) => {
    const user: Record<string, unknown> = { name: record.name };
    if (record.tokenHash !== null) user.tokenHash = record.tokenHash;
    if (record.certSubject !== null) user.certSubject = record.certSubject;
    user.publish = ruleJson(record.publish);
    user.subscribe = ruleJson(record.subscribe);
    user.roles = record.roles;
    return user;
  });
  return `${JSON.stringify({ users }, null, 2)}\n`;
}

function ruleJson(rule: RuleText): Partial<RuleText> {
  return rule.deny.length === 0 ? { allow: rule.allow } : rule;
}

function ruleOf(text: RuleText): Rule {
  return {
    allow: text.allow.length === 0 ? null : Filter.of(...text.allow),
    deny: text.deny.length === 0 ? null : Filter.of(...text.deny),
  };
}

function userOf(node: JsonNode, options: UsersFileOptions): UserRecord {
  const fields = objectOf(node, "a user", USER_KEYS);
  const nameNode = fields.get("name");
  if (nameNode === undefined) fail(node, 'a user needs a "name"');
  const name = stringOf(nameNode, '"name"');
  if (!NAME.test(name))
    fail(nameNode, `user name "${name}": use letters, digits and . _ @ - (at most 64)`);
  const tokenHash = optionalString(fields.get("tokenHash"), '"tokenHash"');
  if (tokenHash !== null) {
    const problem = options.tokenHashProblem(tokenHash);
    if (problem !== null) fail(fields.get("tokenHash") as JsonNode, `"tokenHash": ${problem}`);
  }
  const certSubject = optionalString(fields.get("certSubject"), '"certSubject"');
  if (tokenHash === null && certSubject === null)
    fail(node, `user "${name}" needs a "tokenHash" or a "certSubject" to sign in with`);
  const roles = stringsOf(fields.get("roles"), '"roles"');
  roles.forEach((role, index) => {
    if (!(ROLES as readonly string[]).includes(role))
      fail(itemNode(fields.get("roles"), index), `unknown role "${role}" (roles: ${ROLES})`);
  });
  return {
    name,
    tokenHash,
    certSubject,
    publish: ruleTextOf(fields.get("publish"), '"publish"'),
    subscribe: ruleTextOf(fields.get("subscribe"), '"subscribe"'),
    roles: roles as Role[],
  };
}

function ruleTextOf(node: JsonNode | undefined, what: string): RuleText {
  if (node === undefined) return { allow: [], deny: [] };
  const fields = objectOf(node, what, ["allow", "deny"]);
  const rule = {
    allow: stringsOf(fields.get("allow"), `${what}.allow`),
    deny: stringsOf(fields.get("deny"), `${what}.deny`),
  };
  for (const key of ["allow", "deny"] as const) {
    rule[key].forEach((text, index) => {
      const parsed = Filter.parse([text]);
      if (!parsed.ok) fail(itemNode(fields.get(key), index), `${what}.${key}: ${parsed.reason}`);
    });
  }
  return rule;
}

function objectOf(node: JsonNode, what: string, known: string[]): Map<string, JsonNode> {
  if (node.kind !== "object") fail(node, `${what} must be an object {…}`);
  for (const key of node.keys) {
    if (!known.includes(key.name))
      throw new JsonSourceError(
        `unknown key "${key.name}" in ${what} (known: ${known.join(", ")})`,
        key.line,
        key.column,
      );
  }
  return node.entries;
}

function stringOf(node: JsonNode, what: string): string {
  if (node.kind !== "string") fail(node, `${what} must be a string`);
  if (CONTROL.test(node.value))
    fail(node, `${what} holds a control character (${JSON.stringify(node.value)})`);
  return node.value;
}

function optionalString(node: JsonNode | undefined, what: string): string | null {
  if (node === undefined || node.kind === "null") return null;
  return stringOf(node, what);
}

function stringsOf(node: JsonNode | undefined, what: string): string[] {
  if (node === undefined) return [];
  if (node.kind !== "array") fail(node, `${what} must be a list of strings`);
  return node.items.map((item) => stringOf(item, `each of ${what}`));
}

function itemNode(list: JsonNode | undefined, index: number): JsonNode {
  return (list as Extract<JsonNode, { kind: "array" }>).items[index];
}

function fail(node: JsonNode, reason: string): never {
  throw new JsonSourceError(reason, node.line, node.column);
}
