/**
 * The client commands' server and credential: --url and --auth-token win over ARIA_URL and
 * ARIA_AUTH_TOKEN, which win over the default; empty or malformed values are usage errors;
 * aria bench refuses a token for its own in-process servers.
 */
import { expect, test } from "bun:test";
import { authTokenOf, clientUrlOf, UsageError } from "./args.ts";
import { benchCommand } from "./bench.ts";

const env = { ARIA_URL: "tcp://broker:7400", ARIA_AUTH_TOKEN: "orders:from-env" };

test("flags win over the environment, the environment over the default", () => {
  expect(clientUrlOf({ url: "tcp://flag:1" }, env, "tcp://default:2")).toBe("tcp://flag:1");
  expect(clientUrlOf({}, env, "tcp://default:2")).toBe("tcp://broker:7400");
  expect(clientUrlOf({}, {}, "tcp://default:2")).toBe("tcp://default:2");
  expect(clientUrlOf({}, { ARIA_URL: "" }, null)).toBeNull();
  expect(authTokenOf({ "auth-token": "orders:flag" }, env)).toBe("orders:flag");
  expect(authTokenOf({}, env)).toBe("orders:from-env");
  expect(authTokenOf({}, {})).toBeUndefined();
});

test("empty or malformed values are usage errors", () => {
  expect(() => authTokenOf({ "auth-token": "" }, env)).toThrow(
    new UsageError("--auth-token: must not be empty"),
  );
  expect(() => clientUrlOf({}, { ARIA_URL: "http://x:1" }, null)).toThrow(/^ARIA_URL: /);
});

test("aria bench: --auth-token without a server of --url or ARIA_URL is a usage error", async () => {
  const io = { out: () => {}, err: () => {}, env: () => ({}) };
  await expect(benchCommand(["--auth-token", "a:b", "--quick"], io)).rejects.toThrow(
    "--auth-token is for a server of --url (or ARIA_URL)",
  );
});
