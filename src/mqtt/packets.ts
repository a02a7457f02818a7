/**
 * MQTT control packets (3.1.1 and 5.0) as plain typed values, their MQTT 5 properties, and the
 * reason codes as named constants. One packet shape serves both versions: reason codes are always
 * the MQTT 5 values (the codec maps 3.1.1's CONNACK return codes to and from them), and a 3.1.1
 * packet has empty properties. Does not encode or decode (see codec.ts).
 * Invariants: packet ids are 1..65535 where present; QoS is 0, 1 or 2; user properties keep their
 * order and repeats.
 */

/** The protocol level byte of CONNECT: 3 = MQTT 3.1 (refused), 4 = 3.1.1, 5 = 5.0. */
export type ProtocolVersion = 4 | 5;

/** Quality of service of a PUBLISH or a subscription. */
export type QoS = 0 | 1 | 2;

/** The control packet type numbers (the high nibble of the first byte). */
export const PACKET_TYPES = {
  connect: 1,
  connack: 2,
  publish: 3,
  puback: 4,
  pubrec: 5,
  pubrel: 6,
  pubcomp: 7,
  subscribe: 8,
  suback: 9,
  unsubscribe: 10,
  unsuback: 11,
  pingreq: 12,
  pingresp: 13,
  disconnect: 14,
  auth: 15,
} as const;

/** A control packet's name. */
export type PacketKind = keyof typeof PACKET_TYPES;

/** One user property: a name and a value, both UTF-8 strings; repeats allowed, order kept. */
export type UserProperty = readonly [name: string, value: string];

/**
 * The MQTT 5 properties, all optional; the comments give the identifier and the packets that may
 * carry each (the codec refuses one elsewhere with 0x82 protocol error). 0/1 bytes are booleans.
 */
export interface Properties {
  /** 0x01, PUBLISH and will: 0 = unspecified bytes, 1 = UTF-8 text. */
  payloadFormatIndicator?: 0 | 1;
  /** 0x02, PUBLISH and will: seconds the message lives. */
  messageExpiryInterval?: number;
  /** 0x03, PUBLISH and will: a MIME type. */
  contentType?: string;
  /** 0x08, PUBLISH and will: the topic a response goes to. */
  responseTopic?: string;
  /** 0x09, PUBLISH and will: binary data tying a response to its request. */
  correlationData?: Uint8Array;
  /** 0x0B, PUBLISH (repeats allowed) and SUBSCRIBE (at most one): each 1..268,435,455. */
  subscriptionIdentifiers?: readonly number[];
  /** 0x11, CONNECT, CONNACK and DISCONNECT: seconds the session outlives the connection. */
  sessionExpiryInterval?: number;
  /** 0x12, CONNACK: the client id the server assigned to an empty one. */
  assignedClientIdentifier?: string;
  /** 0x13, CONNACK: the keep alive the server imposes, seconds. */
  serverKeepAlive?: number;
  /** 0x15, CONNECT, CONNACK and AUTH: the extended authentication method. */
  authenticationMethod?: string;
  /** 0x16, CONNECT, CONNACK and AUTH: the extended authentication data. */
  authenticationData?: Uint8Array;
  /** 0x17, CONNECT: whether reason strings and user properties may be sent on failures. */
  requestProblemInformation?: boolean;
  /** 0x18, will: seconds between the connection's end and the will's publication. */
  willDelayInterval?: number;
  /** 0x19, CONNECT: whether the client asks for response information. */
  requestResponseInformation?: boolean;
  /** 0x1A, CONNACK: the basis of a response topic. */
  responseInformation?: string;
  /** 0x1C, CONNACK and DISCONNECT: another server to use. */
  serverReference?: string;
  /** 0x1F, acks, CONNACK, DISCONNECT and AUTH: a human-readable reason. */
  reasonString?: string;
  /** 0x21, CONNECT and CONNACK: QoS 1 and 2 publications in flight at most, 1..65535. */
  receiveMaximum?: number;
  /** 0x22, CONNECT and CONNACK: the highest topic alias accepted (0 = none). */
  topicAliasMaximum?: number;
  /** 0x23, PUBLISH: a topic alias, 1..65535. */
  topicAlias?: number;
  /** 0x24, CONNACK: the highest QoS the server supports (absent = 2). */
  maximumQos?: 0 | 1;
  /** 0x25, CONNACK: whether retained messages are supported. */
  retainAvailable?: boolean;
  /** 0x26, every packet with properties: name/value pairs, order and repeats kept. */
  userProperties?: readonly UserProperty[];
  /** 0x27, CONNECT and CONNACK: the largest packet the sender accepts, bytes, >= 1. */
  maximumPacketSize?: number;
  /** 0x28, CONNACK: whether wildcard subscriptions are supported. */
  wildcardSubscriptionAvailable?: boolean;
  /** 0x29, CONNACK: whether subscription identifiers are supported. */
  subscriptionIdentifiersAvailable?: boolean;
  /** 0x2A, CONNACK: whether shared subscriptions are supported. */
  sharedSubscriptionAvailable?: boolean;
}

/** The will message of a CONNECT. */
export interface Will {
  topic: string;
  payload: Uint8Array;
  qos: QoS;
  retain: boolean;
  /** MQTT 5 will properties (empty for 3.1.1). */
  properties: Properties;
}

/** CONNECT: the first packet of a client. */
export interface ConnectPacket {
  type: "connect";
  protocolVersion: ProtocolVersion;
  /**
   * MQTT 3.1 (protocol name `MQIsdp`, level 3): read and answered as 3.1.1, whose wire format
   * it shares, with 3.1's rules (a client id of 1 to 23 bytes, no session present flag).
   * Present (true) only for 3.1.
   */
  mqtt31?: true;
  /** The client identifier ("" = let the server choose, MQTT 5; 3.1.1 only with cleanStart). */
  clientId: string;
  /** Clean start (5.0) or clean session (3.1.1). */
  cleanStart: boolean;
  /** Keep alive, seconds (0 = none). */
  keepAlive: number;
  username?: string;
  password?: Uint8Array;
  will?: Will;
  properties: Properties;
}

/** CONNACK: the server's answer to CONNECT. */
export interface ConnackPacket {
  type: "connack";
  sessionPresent: boolean;
  /** An MQTT 5 reason code (3.1.1's return codes are mapped to and from these). */
  reasonCode: number;
  properties: Properties;
}

/** PUBLISH: a message in either direction. */
export interface PublishPacket {
  type: "publish";
  /** The topic name; "" only with a topic alias (MQTT 5). */
  topic: string;
  payload: Uint8Array;
  qos: QoS;
  retain: boolean;
  dup: boolean;
  /** 1..65535 for QoS 1 and 2; absent for QoS 0. */
  packetId?: number;
  properties: Properties;
}

/** PUBACK, PUBREC, PUBREL, PUBCOMP: the QoS 1 and 2 acknowledgements. */
export interface PublishAckPacket {
  type: "puback" | "pubrec" | "pubrel" | "pubcomp";
  packetId: number;
  /** 0 = success (always 0 in 3.1.1). */
  reasonCode: number;
  properties: Properties;
}

/** One topic filter of a SUBSCRIBE with its options. */
export interface Subscription {
  filter: string;
  /** The maximum QoS asked for. */
  qos: QoS;
  /** MQTT 5: do not send this client's own publications back. */
  noLocal: boolean;
  /** MQTT 5: keep the retain flag as published. */
  retainAsPublished: boolean;
  /** MQTT 5: 0 = send retained on subscribe, 1 = only for a new subscription, 2 = never. */
  retainHandling: 0 | 1 | 2;
}

/** SUBSCRIBE: one or more topic filters. */
export interface SubscribePacket {
  type: "subscribe";
  packetId: number;
  subscriptions: Subscription[];
  properties: Properties;
}

/** SUBACK: a reason code per filter of the SUBSCRIBE (0, 1, 2 = the QoS granted). */
export interface SubackPacket {
  type: "suback";
  packetId: number;
  reasonCodes: number[];
  properties: Properties;
}

/** UNSUBSCRIBE: one or more topic filters. */
export interface UnsubscribePacket {
  type: "unsubscribe";
  packetId: number;
  filters: string[];
  properties: Properties;
}

/** UNSUBACK: a reason code per filter (MQTT 5; 3.1.1 has none and decodes to []). */
export interface UnsubackPacket {
  type: "unsuback";
  packetId: number;
  reasonCodes: number[];
  properties: Properties;
}

/** PINGREQ or PINGRESP: keep alive. */
export interface PingPacket {
  type: "pingreq" | "pingresp";
}

/** DISCONNECT: either side's last packet (3.1.1: from the client only, no reason code). */
export interface DisconnectPacket {
  type: "disconnect";
  reasonCode: number;
  properties: Properties;
}

/** AUTH: extended authentication (MQTT 5 only). */
export interface AuthPacket {
  type: "auth";
  reasonCode: number;
  properties: Properties;
}

/** Any MQTT control packet. */
export type Packet =
  | ConnectPacket
  | ConnackPacket
  | PublishPacket
  | PublishAckPacket
  | SubscribePacket
  | SubackPacket
  | UnsubscribePacket
  | UnsubackPacket
  | PingPacket
  | DisconnectPacket
  | AuthPacket;

/** The MQTT 5 reason codes (table 2-6 of the 5.0 spec), by name. */
export const REASON = {
  SUCCESS: 0x00,
  NORMAL_DISCONNECTION: 0x00,
  GRANTED_QOS_0: 0x00,
  GRANTED_QOS_1: 0x01,
  GRANTED_QOS_2: 0x02,
  DISCONNECT_WITH_WILL_MESSAGE: 0x04,
  NO_MATCHING_SUBSCRIBERS: 0x10,
  NO_SUBSCRIPTION_EXISTED: 0x11,
  CONTINUE_AUTHENTICATION: 0x18,
  RE_AUTHENTICATE: 0x19,
  UNSPECIFIED_ERROR: 0x80,
  MALFORMED_PACKET: 0x81,
  PROTOCOL_ERROR: 0x82,
  IMPLEMENTATION_SPECIFIC_ERROR: 0x83,
  UNSUPPORTED_PROTOCOL_VERSION: 0x84,
  CLIENT_IDENTIFIER_NOT_VALID: 0x85,
  BAD_USER_NAME_OR_PASSWORD: 0x86,
  NOT_AUTHORIZED: 0x87,
  SERVER_UNAVAILABLE: 0x88,
  SERVER_BUSY: 0x89,
  BANNED: 0x8a,
  SERVER_SHUTTING_DOWN: 0x8b,
  BAD_AUTHENTICATION_METHOD: 0x8c,
  KEEP_ALIVE_TIMEOUT: 0x8d,
  SESSION_TAKEN_OVER: 0x8e,
  TOPIC_FILTER_INVALID: 0x8f,
  TOPIC_NAME_INVALID: 0x90,
  PACKET_IDENTIFIER_IN_USE: 0x91,
  PACKET_IDENTIFIER_NOT_FOUND: 0x92,
  RECEIVE_MAXIMUM_EXCEEDED: 0x93,
  TOPIC_ALIAS_INVALID: 0x94,
  PACKET_TOO_LARGE: 0x95,
  MESSAGE_RATE_TOO_HIGH: 0x96,
  QUOTA_EXCEEDED: 0x97,
  ADMINISTRATIVE_ACTION: 0x98,
  PAYLOAD_FORMAT_INVALID: 0x99,
  RETAIN_NOT_SUPPORTED: 0x9a,
  QOS_NOT_SUPPORTED: 0x9b,
  USE_ANOTHER_SERVER: 0x9c,
  SERVER_MOVED: 0x9d,
  SHARED_SUBSCRIPTIONS_NOT_SUPPORTED: 0x9e,
  CONNECTION_RATE_EXCEEDED: 0x9f,
  MAXIMUM_CONNECT_TIME: 0xa0,
  SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED: 0xa1,
  WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED: 0xa2,
} as const;

/** The MQTT 3.1.1 CONNACK return codes (table 3.1 of the 3.1.1 spec). */
export const CONNACK_RETURN_V4 = {
  ACCEPTED: 0,
  UNACCEPTABLE_PROTOCOL_VERSION: 1,
  IDENTIFIER_REJECTED: 2,
  SERVER_UNAVAILABLE: 3,
  BAD_USER_NAME_OR_PASSWORD: 4,
  NOT_AUTHORIZED: 5,
} as const;

/** Largest remaining length a 4-byte variable byte integer holds (268,435,455). */
export const VARIABLE_BYTE_INTEGER_MAX = 268_435_455;

/** A packet that could not be decoded: the reason code to answer with and why. */
export interface MqttDecodeError {
  /** The MQTT 5 reason code the spec gives (0x81 malformed, 0x82 protocol error, 0x95 ...). */
  reasonCode: number;
  /** What and why, for logs and the MQTT 5 reason string. */
  reason: string;
  /** The packet type of the offending packet (0 when unknown). */
  packetType: number;
  /**
   * The connection's protocol version when known (from this CONNECT or an earlier one), so the
   * door answers CONNACK or DISCONNECT in the client's version; null before any is known.
   */
  protocolVersion: ProtocolVersion | null;
}

/** What the decoder yields: a packet, or the (fatal) error that ends the stream. */
export type MqttDecodeResult = { ok: true; packet: Packet } | { ok: false; error: MqttDecodeError };
