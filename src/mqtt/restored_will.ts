/**
 * RestoredWill: publishes the will of a persistent MQTT session that waited for its delay when the
 * server stopped (or was killed), once it is due after the restart (the door's timer). Its
 * connection is gone, so the will goes through a broker session of its own (native_link.ts),
 * signed in as the user its client signed in as (the CONNECT user name, or the certificate
 * subject), without a credential (the client's is never stored): it publishes with that user's
 * permissions as the users file says now; a user since removed gets the will dropped with a WARN.
 * Not here: when it is due (mqtt_door.ts), what a will is (session_state.ts). Pure.
 * Invariants: one PUBLISH at most; the link ends after its PUBLISH_ACK or ERROR.
 */
import type { ConnectionEvents, Scheduler } from "../broker/ports.ts";
import { CLIENT_NAME_BYTES_MAX } from "../constants.ts";
import type { MessageBatch } from "../protocol/mod.ts";
import type { Log } from "../stdx/log.ts";
import { type NativeError, type NativeEvents, NativeLink } from "./native_link.ts";

/** A will to publish: its Aria topic, payload and stored properties bytes. */
export interface WillMessage {
  clientId: string;
  /** Who its client signed in as: MqttSession.signedInAs, `[user name, certificate subject]`. */
  signedInAs: string;
  topic: string;
  payload: Uint8Array;
  properties: Uint8Array;
}

/** One restored will being published. */
export class RestoredWill implements NativeEvents {
  readonly accepting = true;
  private readonly link: NativeLink;

  constructor(
    broker: ConnectionEvents,
    scheduler: Scheduler,
    private readonly will: WillMessage,
    private readonly log?: Log,
  ) {
    const [userName, subject] = signer(will.signedInAs);
    this.link = new NativeLink(
      broker,
      this,
      {
        remoteAddress: "mqtt-will",
        signedInBefore: userName,
        peerSubject: subject === "" ? undefined : () => subject,
      },
      scheduler,
    );
    this.link.open();
    // The client name, as the session's own link gave it (its first bytes).
    let name = will.clientId;
    while (new TextEncoder().encode(name).length > CLIENT_NAME_BYTES_MAX) name = name.slice(0, -1);
    this.link.hello(name, null);
  }

  /** True once its link ended. */
  get done(): boolean {
    return this.link.ended;
  }

  welcome(_nextSeq: number): void {
    this.link.publish(1, this.will.topic, this.will.payload, this.will.properties);
  }

  publishAck(_requestId: number, _firstSeq: number): void {
    this.link.end();
  }

  error(error: NativeError): void {
    this.log?.warn("mqtt will after a restart not published", {
      client: this.will.clientId,
      reason: error.reason,
    });
    if (!this.link.ended) this.link.end();
  }

  closed(): void {}
  subscribed(_subscriptionId: number, _firstSeq: number): void {}
  data(_subscriptionId: number, _messages: MessageBatch): void {}
  caughtUp(_subscriptionId: number, _nextSeq: number): void {}
  unsubscribed(_subscriptionId: number): void {}
  pause(): void {}
  resume(): void {}
  batchStart(): void {}
  batchEnd(): void {}
}

/** The user name and certificate subject of MqttSession.signedInAs (`["", ""]` when unreadable). */
function signer(signedInAs: string): [string, string] {
  try {
    const parsed = JSON.parse(signedInAs) as unknown;
    if (Array.isArray(parsed) && typeof parsed[0] === "string" && typeof parsed[1] === "string")
      return [parsed[0], parsed[1]];
  } catch {}
  return ["", ""];
}
