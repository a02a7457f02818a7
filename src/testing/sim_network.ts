/**
 * SimConnection: the server side of one simulated client connection, as the broker's
 * `Connection` port. Bytes the broker writes reach the client in order, at once, up to the
 * connection's byte budget for the current step: a slow client has a small budget, a stalled
 * one none. What the budget refuses the broker queues, and the simulator calls
 * `broker.writable()` when budget comes back (as a socket drain event would). The network never
 * reorders or corrupts: it only delays, and disconnects at any byte (the simulator closes a
 * connection whose client holds half a frame).
 *
 * A dead connection (its client hung up, or the server process crashed) swallows writes.
 *
 * NetworkTamper plants a known bug at this edge for `--inject-bug`: it drops one DATA message or
 * swaps two, after the broker wrote them correctly, so the checker must notice.
 */
import type { Connection } from "../broker/ports.ts";
import type { Prng } from "../stdx/prng.ts";
import type { TraceHash } from "./sim_trace.ts";

/** The server side of a simulated connection. */
export class SimConnection implements Connection {
  sessionId = 0;
  /** The client hung up or the server died: writes vanish. */
  dead = false;
  /** The broker closed it; the client notices after the step. */
  closedByServer = false;
  /** Bytes the client still reads this step. */
  budgetBytes = Infinity;
  /** A write was cut short: the broker waits for a drain event. */
  wantsDrain = false;

  constructor(
    private readonly deliver: (bytes: Uint8Array) => void,
    private readonly trace: TraceHash,
    private readonly label: number,
  ) {}

  write(bytes: Uint8Array): number {
    if (this.dead || this.closedByServer) return bytes.length;
    const taken = Math.min(bytes.length, this.budgetBytes);
    this.budgetBytes -= taken;
    if (taken < bytes.length) this.wantsDrain = true;
    if (taken > 0) {
      const chunk = bytes.subarray(0, taken);
      this.trace.number(this.label);
      this.trace.update(chunk);
      this.deliver(chunk);
    }
    return taken;
  }

  close(): void {
    if (!this.dead) this.closedByServer = true;
  }
}

/** A known bug planted in the network for `--inject-bug`. */
export type NetworkBug = "drop-one" | "reorder";

/** One decoded DATA message, copied out of the decoder. */
export interface ReceivedMessage {
  seq: number;
  timeUs: number;
  topic: string;
  payload: Uint8Array;
}

/** Plants one network bug, once, in the DATA messages a client receives. */
export class NetworkTamper {
  fired = false;

  constructor(
    private readonly bug: NetworkBug | null,
    private readonly prng: Prng,
    /** Steps before which the plant waits, so the run has some history first. */
    private readonly fromStep: number,
  ) {}

  /** The messages of one DATA frame as the client will see them. */
  apply(step: number, messages: ReceivedMessage[]): ReceivedMessage[] {
    if (this.bug === null || this.fired || step < this.fromStep) return messages;
    if (this.bug === "drop-one" && messages.length >= 2) {
      // Not the frame's last message: the next one shows the gap at once, before a reconnect
      // could resubscribe from the dropped seq and heal it (as the real client would).
      this.fired = true;
      const index = this.prng.nextInt(messages.length - 1);
      return messages.filter((_, i) => i !== index);
    }
    if (this.bug === "reorder" && messages.length >= 2) {
      this.fired = true;
      const index = this.prng.nextInt(messages.length - 1);
      const out = messages.slice();
      [out[index], out[index + 1]] = [out[index + 1], out[index]];
      return out;
    }
    return messages;
  }
}
