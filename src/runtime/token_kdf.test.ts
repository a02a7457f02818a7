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
  const range = "(N a power of 2 >= 16384, r >= 8, 128*N*r*p <= 128 MiB)";
  expect(tokenHashProblem("scrypt$1000$8$1$c2FsdA==$aGFzaA==")).toBe(
    `scrypt cost N=1000 r=8 p=1 is out of range ${range}`,
  );
  // Too weak (N=2), too slow (a huge p stalled sign-ins), and the range's ends.
  for (const cost of ["2$8$1", "16384$8$100000", "16384$1$1", "262144$8$1", "16384$8$9"])
    expect(tokenHashProblem(`scrypt$${cost}$c2FsdA==$aGFzaA==`)).toMatch(/ is out of range /);
  for (const cost of ["16384$8$1", "131072$8$1", "16384$8$8", "32768$16$2"])
    expect(tokenHashProblem(`scrypt$${cost}$c2FsdA==$aGFzaA==`)).toBeNull();
  expect(await verifyToken("x", "plain")).toBe(false);
});
