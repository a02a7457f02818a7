/**
 * Users: the users a server knows (from --users), and signing in — a HELLO's token or a TLS
 * client certificate's subject to a user. A token reads `NAME:SECRET` (what `aria users add`
 * prints): the name finds the one hash to check. A token naming no user (or a user without a
 * token) is checked against another user's hash and refused whatever the answer, so it costs the
 * same KDF as a wrong secret: timing does not tell which names exist. A token verified once is
 * remembered by its digest (a fast hash): a reconnect costs a SHA-256, not a KDF, and concurrent
 * sign-ins with one new token share one verification. At most KDF_VERIFICATIONS_MAX run at
 * once; the others wait in a queue per source, taken in turn (KdfGate), so one source's flood
 * does not starve another's first sign-in. replace() swaps in a reloaded file; a remembered
 * token counts only while its user keeps the hash it was verified against.
 *
 * Not here: hashing (the runtime's token_kdf, through TokenVerifier), delays and counts of
 * failures (throttle.ts, dispatch.ts). Invariants: a token is never kept, only its digest;
 * verified.size <= VERIFIED_TOKENS_MAX; verifications in flight <= KDF_VERIFICATIONS_MAX.
 * Pure: the verifier is a port.
 */
import type { User } from "./users_file.ts";

/** Verified tokens remembered (each a digest and a name): beyond it the oldest is forgotten. */
const VERIFIED_TOKENS_MAX = 10_000;

/** KDF verifications running at once (the runtime thread pool's share for sign-ins). */
export const KDF_VERIFICATIONS_MAX = 2;

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
  private readonly gate = new KdfGate(KDF_VERIFICATIONS_MAX);

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

  /**
   * The sign-in when it needs no KDF (a certificate subject, no token, a token without a name,
   * a token verified before), else null.
   */
  signInAtOnce(token: string | null, peerSubject?: string): SignIn | null {
    const certified = peerSubject === undefined ? undefined : this.bySubject.get(peerSubject);
    if (peerSubject !== undefined && certified === undefined && token === null)
      return { ok: false, reason: `no user has the certificate subject "${peerSubject}"` };
    // A certificate alone signs in; a token sent beside it must be right and name the same user.
    if (certified !== undefined && token === null) return { ok: true, user: certified };
    if (token === null) return { ok: false, reason: "this server requires an auth token" };
    const colon = token.indexOf(":");
    if (colon <= 0) return { ok: false, reason: "wrong auth token" };
    const user = this.byName.get(token.slice(0, colon));
    const tokenHash = user?.record.tokenHash ?? null;
    if (user === undefined || tokenHash === null) return null;
    const known = this.verified.get(this.verifier.digest(token));
    if (known !== undefined && known.name === user.name && known.tokenHash === tokenHash)
      return sameUser({ ok: true, user }, certified);
    return null;
  }

  /**
   * Signs in with a certificate subject or a token: at once when known, else after the KDF,
   * queued behind the verifications of other sources (`source`: a client's address).
   */
  signIn(token: string | null, peerSubject?: string, source = ""): SignIn | Promise<SignIn> {
    const certified = peerSubject === undefined ? undefined : this.bySubject.get(peerSubject);
    const answer = this.signInByToken(token, peerSubject, source);
    return answer instanceof Promise
      ? answer.then((signIn) => sameUser(signIn, certified))
      : answer;
  }

  private signInByToken(
    token: string | null,
    peerSubject: string | undefined,
    source: string,
  ): SignIn | Promise<SignIn> {
    const atOnce = this.signInAtOnce(token, peerSubject);
    // signInAtOnce answers every sign-in without a token.
    if (atOnce !== null || token === null) return atOnce as SignIn;
    const colon = token.indexOf(":");
    const user = this.byName.get(token.slice(0, colon));
    const tokenHash = user?.record.tokenHash ?? null;
    if (user === undefined || tokenHash === null) return this.refuseAfterKdf(token, source);
    const digest = this.verifier.digest(token);
    const pending = this.verifying.get(digest);
    if (pending !== undefined) return pending;
    const verifying = this.gate
      .run(source, () => this.verifier.verify(token.slice(colon + 1), tokenHash))
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

  /** A token naming no user with a hash: one KDF against a user's hash, then refused. */
  private refuseAfterKdf(token: string, source: string): SignIn | Promise<SignIn> {
    const refused: SignIn = { ok: false, reason: "wrong auth token" };
    let decoy: string | null = null;
    for (const user of this.byName.values()) {
      decoy = user.record.tokenHash;
      if (decoy !== null) break;
    }
    // No user has a token: there is no name to find out.
    if (decoy === null) return refused;
    const stored = decoy;
    const secret = token.slice(token.indexOf(":") + 1);
    return this.gate.run(source, () => this.verifier.verify(secret, stored)).then(() => refused);
  }

  private remember(digest: string, name: string, tokenHash: string): void {
    this.verified.set(digest, { name, tokenHash });
    if (this.verified.size > VERIFIED_TOKENS_MAX)
      this.verified.delete(this.verified.keys().next().value as string);
  }
}

/**
 * At most `max` tasks at once; the waiting ones queued per source. A free place goes to the
 * waiting source served least since it came (ties: the first come), so a source flooding the
 * queue waits behind any other's first task. A source is forgotten when it has nothing running
 * or waiting: memory is bounded by the tasks queued.
 */
export class KdfGate {
  private running = 0;
  /** Sources with tasks running or waiting, in the order they came. */
  private readonly sources = new Map<string, GateSource>();

  constructor(private readonly max: number) {}

  /** Tasks running now. */
  get inFlight(): number {
    return this.running;
  }

  /** Runs `task` for `source` when a place is free and its source's turn has come. */
  run<T>(source: string, task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let entry = this.sources.get(source);
      if (entry === undefined) {
        entry = { waiting: [], running: 0, served: 0 };
        this.sources.set(source, entry);
      }
      const self = entry;
      self.waiting.push(() => {
        this.running++;
        self.running++;
        self.served++;
        task()
          .then(resolve, reject)
          .finally(() => {
            this.running--;
            self.running--;
            if (self.running === 0 && self.waiting.length === 0) this.sources.delete(source);
            this.next();
          });
      });
      this.next();
    });
  }

  private next(): void {
    while (this.running < this.max) {
      let turn: GateSource | undefined;
      for (const entry of this.sources.values())
        if (entry.waiting.length > 0 && (turn === undefined || entry.served < turn.served))
          turn = entry;
      if (turn === undefined) return;
      (turn.waiting.shift() as () => void)();
    }
  }
}

interface GateSource {
  /** Tasks not started, in the order they came. */
  waiting: (() => void)[];
  running: number;
  /** Tasks started since the source came. */
  served: number;
}

/** `signIn`, unless a certificate signed in as another user: a token beside it must agree. */
function sameUser(signIn: SignIn, certified: User | undefined): SignIn {
  if (!signIn.ok || certified === undefined || signIn.user.name === certified.name) return signIn;
  return {
    ok: false,
    reason: `the token signs in as "${signIn.user.name}", the certificate as "${certified.name}"`,
  };
}
