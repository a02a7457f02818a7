/** Token hashes: a token verifies against its own hash only; a malformed hash never verifies. */
import { expect, test } from "bun:test";
import { hashToken, newToken, tokenDigest, tokenHashProblem, verifyToken } from "./token_kdf.ts";

test("a token verifies against its hash, another token does not", async () => {
  const token = newToken();
  expect(token).toMatch(/^aria_[A-Za-z0-9_-]{43}$/);
  const stored = hashToken(token);
  expect(tokenHashProblem(stored)).toBeNull();
  expect(await verifyToken(token, stored)).toBe(true);
  expect(await verifyToken(`${token}x`, stored)).toBe(false);
  // Two hashes of one token differ (a fresh salt each), and both verify.
  const again = hashToken(token);
  expect(again).not.toBe(stored);
  expect(await verifyToken(token, again)).toBe(true);
  expect(tokenDigest(token)).toBe(tokenDigest(token));
  expect(tokenDigest(token)).not.toBe(tokenDigest(`${token}x`));
});

test("malformed or out-of-range hashes are named and never verify", async () => {
  expect(tokenHashProblem("plain")).toMatch(/^not a token hash/);
  expect(tokenHashProblem("scrypt$1000$8$1$c2FsdA==$aGFzaA==")).toBe(
    "scrypt cost N=1000 r=8 p=1 is out of range",
  );
  expect(await verifyToken("x", "plain")).toBe(false);
});
