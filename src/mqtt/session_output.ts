/**
 * SessionOutput: the MQTT session's packets to its client. Encodes a packet, checks it against the
 * client's Maximum Packet Size, writes it to the socket or queues it (a batch, or a socket that
 * took less than all), and writes the queue, joined into one write, once the socket takes more.
 *
 * Does not decide what to send, nor when the socket closes or is gone: mqtt_session.ts does (it owns the
 * batches, `corked`, and reads `queuedBytes` for its back-pressure).
 *
 * Invariants: `queuedBytes` is the sum of the lengths of `queue`; `blocked` is true from a short
 * socket write to the next `writable()` of the session.
 */
import type { Connection } from "../broker/ports.ts";
import { encodePacket } from "./codec_encode.ts";
import { MQTT_PACKET_BYTES_MAX } from "./mqtt_limits.ts";
import type { Packet, ProtocolVersion } from "./packets.ts";

/** The packets of one MQTT connection on their way to its socket. */
export class SessionOutput {
  /** Bytes waiting for the socket (a batch's packets, or what a short write left). */
  readonly queue: Uint8Array[] = [];
  /** The sum of the lengths of `queue`. */
  queuedBytes = 0;
  /** True from a short socket write to the next `writable()`. */
  blocked = false;
  /** The client's Maximum Packet Size (MQTT 5 CONNECT), at most the server's. */
  packetBytesMax = MQTT_PACKET_BYTES_MAX;

  constructor(private readonly socket: Connection) {}

  /**
   * Encodes and writes (or queues, when `corked` or behind queued bytes) a packet; false when it
   * was larger than the client accepts (skipped).
   */
  send(packet: Packet, version: ProtocolVersion, corked: boolean): boolean {
    let bytes = encodePacket(packet, version);
    if (bytes.length > this.packetBytesMax) {
      if (packet.type === "publish") return false;
      // Reason strings and user properties go first (MQTT 5 3.1.2.11.4).
      if ("properties" in packet)
        bytes = encodePacket({ ...packet, properties: {} } as Packet, version);
      if (bytes.length > this.packetBytesMax) return false;
    }
    let written = 0;
    if (this.queue.length === 0 && !corked) {
      written = this.socket.write(bytes);
      if (written < bytes.length) this.blocked = true;
    }
    if (written < bytes.length) {
      this.queue.push(written === 0 ? bytes : bytes.subarray(written));
      this.queuedBytes += bytes.length - written;
    }
    return true;
  }

  /** Writes the queue, joined into one write, until the socket takes no more. */
  flush(): void {
    if (this.queue.length > 1) {
      const joined = new Uint8Array(this.queuedBytes);
      let at = 0;
      for (const part of this.queue) {
        joined.set(part, at);
        at += part.length;
      }
      this.queue.length = 0;
      this.queue.push(joined);
    }
    while (this.queue.length > 0) {
      const head = this.queue[0];
      const written = this.socket.write(head);
      this.queuedBytes -= written;
      if (written < head.length) {
        this.queue[0] = head.subarray(written);
        this.blocked = true;
        return;
      }
      this.queue.shift();
    }
  }

  /** Forgets what is queued (the socket is closed at once). */
  discard(): void {
    this.queue.length = 0;
    this.queuedBytes = 0;
  }
}
