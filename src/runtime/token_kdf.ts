/**
 * token_kdf: users' tokens as salted scrypt hashes (node:crypto, which Bun and Deno both ship).
 * `aria users add` makes a token and its hash; the server verifies a presented token against a
 * stored hash off the event loop (async scrypt runs on the runtime's thread pool), and keys its
 * cache of verified tokens by a SHA-256 digest, so a reconnect pays a hash, not a KDF.
 *
 * Stored form: `scrypt$N$r$p$SALT$HASH` (salt and hash in base64). Not here: users, permissions
 * (src/auth/). Invariants: a token is never stored or logged, only its hash or digest.
 */
import { createHash, randomBytes, scrypt, scryptSync, timingSafeEqual } from "node:crypto";

/** scrypt cost: 16 MiB and ~30 ms per hash here, paid once per token and server (then cached). */
const COST = { N: 16384, r: 8, p: 1 } as const;
const SALT_BYTES = 16;
const HASH_BYTES = 32;
/** scrypt's memory is 128 * N * r bytes: the default limit (32 MiB) would refuse larger N. */
const MEMORY_BYTES_MAX = 256 * 1024 * 1024;
/** The most work (128 * N * r * p bytes) a stored hash may ask per verification: 8x the default. */
const WORK_BYTES_MAX = 8 * 128 * COST.N * COST.r * COST.p;
const STORED = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/]+=*)\$([A-Za-z0-9+/]+=*)$/;

/** A new random token (32 bytes, base64url, prefixed so it is recognisable in a leak scan). */
export function newToken(): string {
  return `aria_${randomBytes(32).toString("base64url")}`;
}

/** The stored form of `token`: a fresh salt and its scrypt hash. */
export function hashToken(token: string): string {
  const salt = randomBytes(SALT_BYTES);
  const hash = scryptSync(token, salt, HASH_BYTES, { ...COST, maxmem: MEMORY_BYTES_MAX });
  return `scrypt$${COST.N}$${COST.r}$${COST.p}$${salt.toString("base64")}$${hash.toString("base64")}`;
}

/** Why `stored` is not a token hash this build reads, or null when it is. */
export function tokenHashProblem(stored: string): string | null {
  const match = STORED.exec(stored);
  if (match === null) return 'not a token hash (expected "scrypt$N$r$p$SALT$HASH")';
  const [n, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])];
  // At least what `aria users` writes (N=2^14, r=8: N=2 is no cost at all), at most 8 times its
  // work (a p of 100000 let a few wrong tokens stall every sign-in).
  const work = 128 * n * r * p;
  if (n < COST.N || (n & (n - 1)) !== 0 || r < COST.r || p < 1 || work > WORK_BYTES_MAX)
    return (
      `scrypt cost N=${n} r=${r} p=${p} is out of range (N a power of 2 >= ${COST.N}, ` +
      `r >= ${COST.r}, 128*N*r*p <= ${WORK_BYTES_MAX / 1024 / 1024} MiB)`
    );
  return null;
}

/** Whether `token` hashes to `stored` (off the event loop; false for a malformed hash). */
export function verifyToken(token: string, stored: string): Promise<boolean> {
  const match = STORED.exec(stored);
  if (match === null || tokenHashProblem(stored) !== null) return Promise.resolve(false);
  const expected = Buffer.from(match[5], "base64");
  const cost = { N: Number(match[1]), r: Number(match[2]), p: Number(match[3]) };
  return new Promise((resolve) => {
    scrypt(
      token,
      Buffer.from(match[4], "base64"),
      expected.length,
      { ...cost, maxmem: MEMORY_BYTES_MAX },
      (error, hash) => resolve(!error && timingSafeEqual(hash, expected)),
    );
  });
}

/** A fast digest of `token` (SHA-256, base64): the key of verified tokens in memory. */
export function tokenDigest(token: string): string {
  return createHash("sha256").update(token).digest("base64");
}
