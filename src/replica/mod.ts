/**
 * replica: `aria serve --follow URL` — a server that holds its leader's log seq for seq
 * (follower.ts: connect, check, apply, reconnect). The append path it uses is the broker's
 * (Sequencer.replicate); the server wires it (src/server/server.ts). docs/cluster.md.
 */
export {
  Follower,
  type FollowerOptions,
  type FollowerStatus,
  type LogMessage,
  type ReplicaBroker,
  ReplicaError,
  type ReplicaFailure,
} from "./follower.ts";
export {
  ACK_MODES,
  type AckMode,
  ISR_MAX_LAG_US_DEFAULT,
  REPLICA_NAME_PREFIX,
  type ReplicaInfo,
  ReplicaTracker,
} from "./tracker.ts";
