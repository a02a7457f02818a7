/**
 * Users: the users a server knows (from --users), and signing in — a HELLO's token or a TLS
 * client certificate's subject to a user. A token reads `NAME:SECRET` (what `aria users add`
 * prints): the name finds the one hash to check, so a token naming no user is refused without
 * running the KDF. A token verified once is remembered by its digest (a fast hash): a reconnect
 * costs a SHA-256, not a KDF, and concurrent sign-ins with one new token share one verification.
 * replace() swaps in a reloaded file; a remembered token counts only while its user keeps the
 * hash it was verified against.
 *
 * Not here: hashing (the runtime's token_kdf, through TokenVerifier), delays and counts of
 * failures (throttle.ts, dispatch.ts). Invariants: a token is never kept, only its digest;
 * verified.size <= VERIFIED_TOKENS_MAX. Pure: the verifier is a port.
 */
import type { User } from "./users_file.ts";

/** Verified tokens remembered (each a digest and a name): beyond it the oldest is forgotten. */
const VERIFIED_TOKENS_MAX = 10_000;

/** What signing in needs from the runtime: a slow check and a fast digest. */
export interface TokenVerifier {
  verify(token: string, stored: string): Promise<boolean>;
  digest(token: string): string;
}

/** The outcome of a sign-in: the user, or why not. */
export type SignIn = { ok: true; user: User } | { ok: false; reason: string };

/** Users by name and certificate subject, with remembered tokens. */
export class Users {
  private byName = new Map<string, User>();
  private bySubject = new Map<string, User>();
  /** Token digest → the name and hash it was verified against. */
  private readonly verified = new Map<string, { name: string; tokenHash: string }>();
  private readonly verifying = new Map<string, Promise<SignIn>>();

  constructor(
    users: readonly User[],
    private readonly verifier: TokenVerifier,
  ) {
    this.replace(users);
  }

  /** Swaps in a new set of users (a reload). */
  replace(users: readonly User[]): void {
    this.byName = new Map(users.map((user) => [user.name, user]));
    this.bySubject = new Map();
    for (const user of users) {
      if (user.record.certSubject !== null) this.bySubject.set(user.record.certSubject, user);
    }
  }

  /** The user named `name`, if any. */
  user(name: string): User | undefined {
    return this.byName.get(name);
  }

  /** All users. */
  all(): User[] {
    return [...this.byName.values()];
  }

  /** Signs in with a certificate subject or a token: at once when known, else after the KDF. */
  signIn(token: string | null, peerSubject?: string): SignIn | Promise<SignIn> {
    if (peerSubject !== undefined) {
      const user = this.bySubject.get(peerSubject);
      if (user !== undefined) return { ok: true, user };
      if (token === null)
        return { ok: false, reason: `no user has the certificate subject "${peerSubject}"` };
    }
    if (token === null) return { ok: false, reason: "this server requires an auth token" };
    const colon = token.indexOf(":");
    const user = colon > 0 ? this.byName.get(token.slice(0, colon)) : undefined;
    const tokenHash = user?.record.tokenHash ?? null;
    if (user === undefined || tokenHash === null) return { ok: false, reason: "wrong auth token" };
    const digest = this.verifier.digest(token);
    const known = this.verified.get(digest);
    if (known !== undefined && known.name === user.name && known.tokenHash === tokenHash)
      return { ok: true, user };
    const pending = this.verifying.get(digest);
    if (pending !== undefined) return pending;
    const verifying = this.verifier
      .verify(token.slice(colon + 1), tokenHash)
      .then((matches): SignIn => {
        this.verifying.delete(digest);
        if (!matches) return { ok: false, reason: "wrong auth token" };
        this.remember(digest, user.name, tokenHash);
        // A reload while verifying: the user as it is now (or gone).
        const current = this.byName.get(user.name);
        return current?.record.tokenHash === tokenHash
          ? { ok: true, user: current }
          : { ok: false, reason: "wrong auth token" };
      });
    this.verifying.set(digest, verifying);
    return verifying;
  }

  private remember(digest: string, name: string, tokenHash: string): void {
    this.verified.set(digest, { name, tokenHash });
    if (this.verified.size > VERIFIED_TOKENS_MAX)
      this.verified.delete(this.verified.keys().next().value as string);
  }
}
