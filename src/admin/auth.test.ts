/** The admin app's bearer check: one token, or a check the server gives (users with `admin`). */
import { expect, test } from "bun:test";
import { bearerTokenMatches } from "./auth.ts";

test("one token: the bearer must be it", () => {
  expect(bearerTokenMatches("Bearer s3cret", "s3cret")).toBe(true);
  expect(bearerTokenMatches("bearer s3cret", "s3cret")).toBe(true);
  expect(bearerTokenMatches("Bearer s3cre", "s3cret")).toBe(false);
  expect(bearerTokenMatches(undefined, "s3cret")).toBe(false);
});

test("a check: it hears the bearer token, and its answer (or promise) is the answer", async () => {
  const heard: string[] = [];
  const adminOnly = async (bearer: string) => {
    heard.push(bearer);
    return bearer === "ops:x";
  };
  expect(await bearerTokenMatches("Bearer ops:x", adminOnly)).toBe(true);
  expect(await bearerTokenMatches("Bearer orders:y", adminOnly)).toBe(false);
  expect(await bearerTokenMatches("Basic b3BzOng=", adminOnly)).toBe(false);
  expect(heard).toEqual(["ops:x", "orders:y"]);
});
