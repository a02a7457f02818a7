/**
 * SignIn: the stage where a HELLO's credential becomes a session's user (or none). Without users
 * a HELLO carries the server's one shared token, or none is asked. With users (auth/users.ts) it
 * signs in as a user by a token `NAME:SECRET` or a TLS client certificate's subject; a token not
 * yet verified is checked off the event loop, and until the answer comes the session is pending:
 * dispatch reads none of its frames, and what arrives meanwhile is held here (bounded).
 *
 *   HELLO ─▶ answered without a KDF? ─yes─▶ welcome | failed
 *                  └ no: queue of its address ─▶ its turn, after the address's penalty
 *                        ─▶ verify (KDF, async, Users' gate) ─▶ welcome | failed
 *   failed ─▶ count, log ─▶ pending for the address's delay (auth/throttle.ts) ─▶ fatal AUTH_FAILED
 *
 * One address has at most one token in verification: the next waits until the address's last
 * failure's delay has passed (FailureThrottle.waitUs), so parallel guesses from one address are
 * verified one per penalty step. A token verified before costs no KDF and is answered at once,
 * even at the penalty: it proves the secret already.
 *
 * Not here: the handshake's version check and WELCOME (dispatch.ts), users and their tokens
 * (auth/). Invariants: a session is pending from a verification or a failure's delay until its
 * answer; a queued session is pending, and leaves the queue when it ends; a pending session
 * holds at most SIGN_IN_HELD_BYTES_MAX of input; a failure is counted and logged once and
 * answered once. Pure: the timer and the log are ports.
 */
import type { Log } from "../stdx/log.ts";
import type { FailureThrottle, User, Users } from "../auth/mod.ts";
import type { AriaErrorCode } from "../protocol/mod.ts";
import { sameSecret } from "../stdx/secret.ts";
import type { Clock } from "./ports.ts";
import type { SubscriberSession } from "./subscription.ts";

/** Bytes a connection may send while its sign-in is pending (a HELLO's pipelined followers). */
export const SIGN_IN_HELD_BYTES_MAX = 256 * 1024;

/** What signing in is built from (the users, the shared token, the failures' throttle). */
export interface SignInOptions {
  /** When set, HELLO must carry this token. */
  authToken?: string;
  /** When set, HELLO signs in as one of these users (a token `NAME:SECRET` or a certificate). */
  users?: Users;
  /** Failed sign-ins per source address and the delay before their ERROR (absent: at once). */
  throttle?: FailureThrottle;
  /** Runs `run` after `delayMs` (the runtime's timer; absent: at once). */
  scheduleAfter?: (delayMs: number, run: () => void) => void;
  /** Where failed sign-ins (and, in dispatch, connections) are logged. */
  log?: Log;
}

/** What signing in asks of dispatch. */
export interface SignInOutput {
  readonly clock: Clock;
  /** Completes the handshake as `user` (null: no users). */
  welcome(session: SubscriberSession, clientName: string, user: User | null): void;
  /** Writes an ERROR frame (see dispatch.ts). */
  fail(
    session: SubscriberSession,
    code: AriaErrorCode,
    reason: string,
    related: { fatal: true },
  ): void;
  /** Reads what the decoder still holds, then `held`, as frames; settles the session. */
  readOn(session: SubscriberSession, held: Uint8Array[]): void;
  /** Settles a session after an event of its own (a timer). */
  afterEvent(session: SubscriberSession): void;
}

/** A HELLO waiting for its address's turn to be verified. */
interface QueuedSignIn {
  clientName: string;
  authToken: string | null;
}

/** The source address failures are counted against. */
function addressOf(session: SubscriberSession): string {
  return session.connection.remoteAddress ?? "unknown address";
}

/** HELLO's credential to a user, the pending sessions, and the failures. */
export class SignIn {
  /** Failed sign-ins since start (a missing or wrong token or certificate). */
  failures = 0;
  /** Pending sessions, with the chunks that arrived meanwhile (copies). */
  private readonly pending = new Map<SubscriberSession, Uint8Array[]>();
  /** Pending sessions whose token waits for the KDF, by source address, in arrival order. */
  private readonly queued = new Map<string, Map<SubscriberSession, QueuedSignIn>>();
  /** Addresses with a token being verified (or waiting out their penalty before it). */
  private readonly verifyingFrom = new Set<string>();

  constructor(
    private readonly options: SignInOptions,
    private readonly output: SignInOutput,
  ) {}

  /** True while `session` waits for its sign-in's answer: none of its frames may be read. */
  isPending(session: SubscriberSession): boolean {
    return this.pending.has(session);
  }

  /** Signs `session` in with HELLO's token (and its connection's certificate subject). */
  hello(session: SubscriberSession, clientName: string, authToken: string | null): void {
    const users = this.options.users;
    const before = session.connection.signedInBefore;
    if (before !== undefined) {
      // The server's own link for a client it signed in before (no credential is kept).
      if (users === undefined) return this.output.welcome(session, clientName, null);
      if (before !== "") {
        const user = users.user(before);
        return user === undefined
          ? this.failed(session, `the user "${before}" no longer exists`)
          : this.output.welcome(session, clientName, user);
      }
    }
    if (users === undefined) {
      const expected = this.options.authToken;
      if (
        expected !== undefined &&
        expected !== "" &&
        (authToken === null || !sameSecret(authToken, expected))
      )
        return this.failed(
          session,
          authToken === null ? "this server requires an auth token" : "wrong auth token",
        );
      return this.output.welcome(session, clientName, null);
    }
    const atOnce = users.signInAtOnce(authToken, session.connection.peerSubject);
    if (atOnce !== null)
      return atOnce.ok
        ? this.output.welcome(session, clientName, atOnce.user)
        : this.failed(session, atOnce.reason);
    this.pending.set(session, []);
    const address = addressOf(session);
    const queue = this.queued.get(address) ?? new Map<SubscriberSession, QueuedSignIn>();
    this.queued.set(address, queue.set(session, { clientName, authToken }));
    this.verifyNext(address);
  }

  /**
   * Verifies the next token queued from `address` unless one of its own is being verified:
   * after the address's penalty (its last failure's delay) has passed.
   */
  private verifyNext(address: string): void {
    if (this.verifyingFrom.has(address)) return;
    const queue = this.queued.get(address);
    if (queue === undefined) return;
    const [session, { clientName, authToken }] = queue.entries().next().value as [
      SubscriberSession,
      QueuedSignIn,
    ];
    queue.delete(session);
    if (queue.size === 0) this.queued.delete(address);
    this.verifyingFrom.add(address);
    const verify = () => {
      if (!this.waiting(session)) {
        this.verifyingFrom.delete(address);
        return this.verifyNext(address);
      }
      const outcome = (this.options.users as Users).signIn(
        authToken,
        session.connection.peerSubject,
        address,
      );
      void Promise.resolve(outcome).then((signIn) => {
        this.verifyingFrom.delete(address);
        if (this.waiting(session)) {
          const held = this.pending.get(session) ?? [];
          this.pending.delete(session);
          if (signIn.ok) this.output.welcome(session, clientName, signIn.user);
          else this.failed(session, signIn.reason);
          this.output.readOn(session, held);
        }
        this.verifyNext(address);
      });
    };
    const waitUs = this.options.throttle?.waitUs(address, this.output.clock.nowUs()) ?? 0;
    const scheduleAfter = this.options.scheduleAfter;
    if (waitUs === 0 || scheduleAfter === undefined) return verify();
    scheduleAfter(waitUs / 1000, verify);
  }

  /** Whether `session` still waits for its sign-in (not ended meanwhile). */
  private waiting(session: SubscriberSession): boolean {
    return this.pending.has(session) && !session.closing && !session.closed;
  }

  /** Keeps a chunk that arrived while `session` is pending; past the bound the session ends. */
  hold(session: SubscriberSession, bytes: Uint8Array): void {
    const held = this.pending.get(session);
    if (held === undefined) return;
    held.push(bytes.slice());
    let heldBytes = 0;
    for (const chunk of held) heldBytes += chunk.length;
    if (heldBytes <= SIGN_IN_HELD_BYTES_MAX) return;
    this.forget(session);
    this.output.fail(
      session,
      "ARIA_ERR_HANDSHAKE_REQUIRED",
      `${heldBytes} bytes sent before the HELLO was answered; wait for WELCOME`,
      { fatal: true },
    );
    this.output.afterEvent(session);
  }

  /** The session closed: nothing of it is kept. */
  forget(session: SubscriberSession): void {
    this.pending.delete(session);
    const address = addressOf(session);
    const queue = this.queued.get(address);
    if (queue?.delete(session) && queue.size === 0) this.queued.delete(address);
  }

  /**
   * Counts and logs a failed sign-in, and answers it with a fatal AUTH_FAILED after the delay
   * its source address has earned; the session is pending meanwhile.
   */
  private failed(session: SubscriberSession, reason: string): void {
    this.failures++;
    const address = addressOf(session);
    const delayUs = this.options.throttle?.failed(address, this.output.clock.nowUs()) ?? 0;
    this.options.log?.warn("sign-in failed", {
      session: session.id,
      address,
      reason,
      errorAfterMs: Math.round(delayUs / 1000),
    });
    const answer = () => {
      this.pending.delete(session);
      this.output.fail(session, "ARIA_ERR_AUTH_FAILED", reason, { fatal: true });
    };
    const scheduleAfter = this.options.scheduleAfter;
    if (delayUs === 0 || scheduleAfter === undefined) return answer();
    this.pending.set(session, []);
    scheduleAfter(delayUs / 1000, () => {
      // Ended meanwhile (closed, or failed for sending too much while it waited): said already.
      if (session.closing || session.closed) return;
      answer();
      this.output.afterEvent(session);
    });
  }
}
