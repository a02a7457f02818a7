import { expect, test } from "bun:test";
import { sameSecret } from "./secret.ts";

test("sameSecret is string equality: same, different anywhere, prefixes, empty, non-ASCII", () => {
  expect(sameSecret("token-123", "token-123")).toBe(true);
  expect(sameSecret("", "")).toBe(true);
  expect(sameSecret("ünï", "ünï")).toBe(true);
  for (const other of ["token-124", "Token-123", "token-12", "token-1234", "", "ünï"])
    expect(sameSecret("token-123", other)).toBe(false);
  expect(sameSecret("ab", "abab")).toBe(false); // a repeat of the shorter one is not equal
});
