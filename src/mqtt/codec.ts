/**
 * The MQTT codec: a streaming decoder (bytes in, any split, packets or one fatal error out) and an
 * encoder for every packet of MQTT 3.1.1 and 5.0. Pure: no I/O, no clock.
 * Placeholder bodies: the signatures are final, the implementation lands next.
 */
import type { MqttDecodeResult, Packet, ProtocolVersion } from "./packets.ts";

/** Which side decodes: a server accepts client-to-server packets only, a client the reverse. */
export type MqttRole = "server" | "client" | "any";

/** Options of an MqttDecoder. */
export interface MqttDecoderOptions {
  /** The side that decodes (default "any": every packet type, for tests and tools). */
  role?: MqttRole;
  /** The version when known up front (a client); a server learns it from CONNECT. */
  protocolVersion?: ProtocolVersion;
  /** The largest whole packet accepted, fixed header included (MQTT's Maximum Packet Size). */
  packetBytesMax?: number;
}

/** Splits a byte stream into MQTT packets; the first error is fatal (MQTT closes on it). */
export class MqttDecoder {
  constructor(readonly options: MqttDecoderOptions = {}) {}

  /** The connection's protocol version: given, or learnt from CONNECT; null before. */
  get protocolVersion(): ProtocolVersion | null {
    return this.options.protocolVersion ?? null;
  }

  /** Appends received bytes (any split); the chunk may be reused by the caller after next(). */
  push(_chunk: Uint8Array): void {
    throw new Error("MqttDecoder: not implemented yet");
  }

  /** The next packet or error, or null when more bytes are needed (or after the error). */
  next(): MqttDecodeResult | null {
    throw new Error("MqttDecoder: not implemented yet");
  }
}

/** Encodes `packet` for a connection of `protocolVersion` (3.1.1 drops properties). */
export function encodePacket(_packet: Packet, _protocolVersion: ProtocolVersion): Uint8Array {
  throw new Error("encodePacket: not implemented yet");
}
