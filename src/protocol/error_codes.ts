/**
 * The one table of Aria's error codes: a stable string code (`ARIA_ERR_*`, used in logs, the CLI
 * and the client API) beside the numeric code sent in ERROR frames. Codes are never renumbered or
 * reused: a new failure gets a new row at the end. Wire code 0 is reserved for "no error".
 * Also owns `AriaError`, the typed error thrown at API edges (client, CLI); hot paths use results.
 */

/** String code → wire code. Append only. */
export const ARIA_ERROR_WIRE_CODES = {
  ARIA_ERR_MALFORMED_FRAME: 1,
  ARIA_ERR_FRAME_TOO_LARGE: 2,
  ARIA_ERR_UNKNOWN_FRAME_TYPE: 3,
  ARIA_ERR_UNSUPPORTED_VERSION: 4,
  ARIA_ERR_HANDSHAKE_REQUIRED: 5,
  ARIA_ERR_AUTH_FAILED: 6,
  ARIA_ERR_UNEXPECTED_FRAME: 7,
  ARIA_ERR_INVALID_TOPIC: 8,
  ARIA_ERR_INVALID_FILTER: 9,
  ARIA_ERR_INVALID_START: 10,
  ARIA_ERR_PAYLOAD_TOO_LARGE: 11,
  ARIA_ERR_BATCH_TOO_LARGE: 12,
  ARIA_ERR_TOO_MANY_SUBSCRIPTIONS: 13,
  ARIA_ERR_DUPLICATE_SUBSCRIPTION: 14,
  ARIA_ERR_UNKNOWN_SUBSCRIPTION: 15,
  ARIA_ERR_TOO_MANY_CONNECTIONS: 16,
  ARIA_ERR_SHUTTING_DOWN: 17,
  ARIA_ERR_INTERNAL: 18,
  ARIA_ERR_STORAGE_FAILED: 19,
  ARIA_ERR_CONNECTION_LOST: 20,
  ARIA_ERR_INVALID_URL: 21,
  ARIA_ERR_INVALID_ARGUMENT: 22,
  ARIA_ERR_PERMISSION_DENIED: 23,
  ARIA_ERR_CONSUMER_BUSY: 24,
  ARIA_ERR_CONSUMER_MISMATCH: 25,
  ARIA_ERR_CONSUMERS_FULL: 26,
  ARIA_ERR_PROPERTIES_TOO_LARGE: 27,
  ARIA_ERR_NOT_LEADER: 28,
} as const;

/** A stable error code of Aria. */
export type AriaErrorCode = keyof typeof ARIA_ERROR_WIRE_CODES;

/** What each code means, in one line (docs/protocol.md lists the same table; a test keeps them equal). */
export const ARIA_ERROR_SUMMARIES: Readonly<Record<AriaErrorCode, string>> = {
  ARIA_ERR_MALFORMED_FRAME:
    "a frame's header or body does not follow the layout (truncated field, count overrun, trailing bytes, non-safe u64, bad UTF-8)",
  ARIA_ERR_FRAME_TOO_LARGE:
    "a frame's length field exceeds the frame limit (fatal: the stream cannot be read on)",
  ARIA_ERR_UNKNOWN_FRAME_TYPE: "a frame type this version does not know; the frame is skipped",
  ARIA_ERR_UNSUPPORTED_VERSION:
    "HELLO or WELCOME carries a protocol version this peer does not speak",
  ARIA_ERR_HANDSHAKE_REQUIRED: "a frame other than HELLO arrived before the handshake completed",
  ARIA_ERR_AUTH_FAILED: "the auth token of HELLO was missing or not accepted",
  ARIA_ERR_UNEXPECTED_FRAME:
    "a well-formed frame not valid in this direction or state (a second HELLO, DATA from a client)",
  ARIA_ERR_INVALID_TOPIC: "a message's topic fails topic validation",
  ARIA_ERR_INVALID_FILTER: "a subscription's filter fails filter validation",
  ARIA_ERR_INVALID_START: "a subscription's start kind is unknown or its value is out of range",
  ARIA_ERR_PAYLOAD_TOO_LARGE: "a message's payload exceeds the payload limit",
  ARIA_ERR_BATCH_TOO_LARGE: "a PUBLISH holds more messages than the batch limit",
  ARIA_ERR_TOO_MANY_SUBSCRIPTIONS: "the connection already holds the most subscriptions allowed",
  ARIA_ERR_DUPLICATE_SUBSCRIPTION: "SUBSCRIBE reuses a subscription id that is still active",
  ARIA_ERR_UNKNOWN_SUBSCRIPTION: "UNSUBSCRIBE names a subscription id that is not active",
  ARIA_ERR_TOO_MANY_CONNECTIONS: "the server holds the most connections allowed",
  ARIA_ERR_SHUTTING_DOWN: "the server is shutting down",
  ARIA_ERR_INTERNAL: "a bug in the server; the reason says where",
  ARIA_ERR_STORAGE_FAILED: "the server could not persist or read messages",
  ARIA_ERR_CONNECTION_LOST:
    "client side: the connection closed before the answer came (the publish may or may not have been sequenced)",
  ARIA_ERR_INVALID_URL: "client side: the server URL is not tcp://HOST:PORT",
  ARIA_ERR_INVALID_ARGUMENT:
    "client side: an argument of a client call is out of range (a client name or auth token too long)",
  ARIA_ERR_PERMISSION_DENIED:
    "the signed-in user may not publish to the topic or subscribe to the filter entry named in the reason",
  ARIA_ERR_CONSUMER_BUSY:
    "a durable consumer that is not shared already has a subscription open (one at a time)",
  ARIA_ERR_CONSUMER_MISMATCH:
    "a durable consumer of that name exists with another filter, or shared where it is not (or the other way round)",
  ARIA_ERR_CONSUMERS_FULL: "the server holds the most durable consumers allowed",
  ARIA_ERR_PROPERTIES_TOO_LARGE: "a message's properties exceed the properties limit",
  ARIA_ERR_NOT_LEADER:
    "the server is a replica (aria serve --follow): publish to the leader, whose URL the reason names",
};

/** The code an ERROR frame carries when its wire code is newer than this table. */
export const ARIA_ERR_UNKNOWN = "ARIA_ERR_UNKNOWN";

const CODE_OF_WIRE: (AriaErrorCode | undefined)[] = [];
for (const code of Object.keys(ARIA_ERROR_WIRE_CODES) as AriaErrorCode[]) {
  CODE_OF_WIRE[ARIA_ERROR_WIRE_CODES[code]] = code;
}

/** The wire code of `code`. */
export function wireCodeOf(code: AriaErrorCode): number {
  return ARIA_ERROR_WIRE_CODES[code];
}

/** The string code of wire code `wireCode`, or ARIA_ERR_UNKNOWN for a code this table lacks. */
export function codeOfWire(wireCode: number): AriaErrorCode | typeof ARIA_ERR_UNKNOWN {
  return CODE_OF_WIRE[wireCode] ?? ARIA_ERR_UNKNOWN;
}

/** A failure with a stable code, thrown at API edges (client calls, CLI). */
export class AriaError extends Error {
  override name = "AriaError";
  /** The numeric code of the ERROR frame, 0 when the code is ARIA_ERR_UNKNOWN. */
  readonly wireCode: number;
  /** True when the connection the error came from is closed by it. */
  readonly fatal: boolean;

  constructor(
    readonly code: AriaErrorCode | typeof ARIA_ERR_UNKNOWN,
    message: string,
    options: { fatal?: boolean; wireCode?: number } = {},
  ) {
    super(message);
    this.wireCode =
      options.wireCode ?? (code === ARIA_ERR_UNKNOWN ? 0 : ARIA_ERROR_WIRE_CODES[code]);
    this.fatal = options.fatal ?? false;
  }
}
