/**
 * The topic tree of /api/topics: per-topic volumes folded into nodes by `/`-separated segment,
 * below one prefix and down to a depth, with messages and bytes per node (its own topic plus
 * everything below it). Children are sorted by bytes (largest first) and capped: the rest are
 * counted in `childrenOmitted`. Pure; O(topics under the prefix × depth).
 */
import { type Filter, isUnder } from "../topic/mod.ts";
import type { VolumeRow } from "../split/mod.ts";

/** One node of the tree. */
export interface TopicNode {
  /** The full prefix ("" for the root). */
  path: string;
  /** Its last segment ("" for the root). */
  name: string;
  /** Messages and bytes of the node's own topic plus every topic below it. */
  messages: number;
  bytes: number;
  /** Topics in the subtree, the node's own included. */
  topics: number;
  /** Whether the node is itself a topic, and its own volumes. */
  isTopic: boolean;
  ownMessages: number;
  ownBytes: number;
  /** Whether topics lie below this node (its children are listed only above the depth limit). */
  hasChildren: boolean;
  children?: TopicNode[];
  /** Children left out by the cap (the smallest). */
  childrenOmitted?: number;
}

/** Options of topicTreeOf. */
export interface TopicTreeOptions {
  /** Levels of children listed below the prefix node (0: the node alone). */
  depth: number;
  /** Children listed per node; the smallest beyond it are only counted. */
  childrenMax: number;
}

interface Building {
  node: TopicNode;
  children: Map<string, Building> | null;
}

/** The subtree of `rows` under `prefix`, or null when no topic lies under it. */
export function topicTreeOf(
  rows: readonly VolumeRow[],
  prefix: string,
  options: TopicTreeOptions,
): TopicNode | null {
  const root: Building = {
    node: emptyNode(prefix, prefix.slice(prefix.lastIndexOf("/") + 1)),
    children: null,
  };
  let found = false;
  for (const row of rows) {
    if (!isUnder(row.topic, prefix)) continue;
    found = true;
    // Segments below the prefix: "" for the prefix's own topic.
    const rest =
      row.topic.length === prefix.length
        ? ""
        : row.topic.slice(prefix.length === 0 ? 0 : prefix.length + 1);
    const segments = rest === "" ? [] : rest.split("/");
    let at = root;
    add(at.node, row, segments.length === 0);
    for (let level = 0; level < segments.length; level++) {
      at.node.hasChildren = true;
      if (level >= options.depth) break;
      at.children ??= new Map();
      let child = at.children.get(segments[level]);
      if (child === undefined) {
        const path = at.node.path === "" ? segments[level] : `${at.node.path}/${segments[level]}`;
        child = { node: emptyNode(path, segments[level]), children: null };
        at.children.set(segments[level], child);
      }
      at = child;
      add(at.node, row, level === segments.length - 1);
    }
  }
  if (!found && prefix !== "") return null;
  return finish(root, options.childrenMax);
}

function emptyNode(path: string, name: string): TopicNode {
  return {
    path,
    name,
    messages: 0,
    bytes: 0,
    topics: 0,
    isTopic: false,
    ownMessages: 0,
    ownBytes: 0,
    hasChildren: false,
  };
}

function add(node: TopicNode, row: VolumeRow, own: boolean): void {
  node.messages += row.messages;
  node.bytes += row.bytes;
  node.topics++;
  if (own) {
    node.isTopic = true;
    node.ownMessages = row.messages;
    node.ownBytes = row.bytes;
  }
}

function finish(building: Building, childrenMax: number): TopicNode {
  const node = building.node;
  if (building.children === null) return node;
  const children = [...building.children.values()].map((child) => finish(child, childrenMax));
  children.sort((a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  node.children = children.slice(0, childrenMax);
  if (children.length > childrenMax) node.childrenOmitted = children.length - childrenMax;
  return node;
}

/** The topics of /api/topics?filter=F: the matching rows, largest first, and their totals. */
export interface MatchingTopics {
  /** At most `topicsMax` matching topics, by bytes (then name). */
  topics: VolumeRow[];
  /** Matching topics left out by the cap (the smallest). */
  topicsOmitted: number;
  /** Over every matching topic. */
  total: { topics: number; messages: number; bytes: number };
}

/** The rows whose topic `filter` matches (`*` and `**` as a subscription reads them). */
export function matchingTopicsOf(
  rows: readonly VolumeRow[],
  filter: Filter,
  topicsMax: number,
): MatchingTopics {
  const matching = rows.filter((row) => filter.matches(row.topic));
  const total = { topics: matching.length, messages: 0, bytes: 0 };
  for (const row of matching) {
    total.messages += row.messages;
    total.bytes += row.bytes;
  }
  matching.sort((a, b) => b.bytes - a.bytes || (a.topic < b.topic ? -1 : 1));
  const topics = matching.slice(0, topicsMax).map(({ topic, messages, bytes }) => ({
    topic,
    messages,
    bytes,
  }));
  return { topics, topicsOmitted: matching.length - topics.length, total };
}
