/**
 * TopicTree: the prefix tree of a volume table's topics, in parallel typed arrays, which the
 * planners cut into stores and the metrics walk for subtree reads.
 *
 *   app ─ app/orders ─┬─ app/orders/new ─┬─ app/orders/new/eu      (topic)
 *   (prefix)          │  (prefix+topic)  ├─ app/orders/new/us      (topic)
 *                     │                  └─ [self] app/orders/new  (the topic itself, alone)
 *                     └─ app/orders/fill                            (topic, a leaf)
 *
 * Nodes: one PREFIX node per distinct prefix of a topic (`app`, `app/orders`, ...). A topic sits
 * on the leaf that holds it alone: its own prefix node when nothing is below it, else a SELF node,
 * a child of its prefix node, so a planner can give that topic a store without its subtree.
 * Invariants: parent[node] < node (parents are created first, so a forward pass visits parents
 * before children and a backward pass children before parents); every topic has exactly one leaf;
 * topicCount/bytes of a node are the sums over the topics of its subtree; children of a node are
 * ordered by subtree bytes descending (ties by id), the order the planners' pruned walks rely on.
 * Partition roots are the depth-2 prefix nodes and the leaves of one-segment topics: every topic
 * lies under exactly one of them, the one named by partitionOf(topic).
 */
import { PARTITION_SEGMENTS } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import type { VolumeTable } from "./volume_table.ts";

/** Node kind: a prefix of topics (a subtree). */
export const NODE_PREFIX = 0;
/** Node kind: a topic alone, beside the subtree of the same name. */
export const NODE_SELF = 1;

/** The prefix tree of a table, see the file comment. */
export interface TopicTree {
  readonly table: VolumeTable;
  readonly nodeCount: number;
  /** Parent node, -1 for depth-1 prefixes. */
  readonly parent: Int32Array;
  /** Segments in the node's path. */
  readonly depth: Uint8Array;
  /** NODE_PREFIX or NODE_SELF. */
  readonly kind: Uint8Array;
  /** The node's path (a SELF node has its prefix node's path). */
  readonly path: readonly string[];
  /** The topic a leaf holds, else -1. */
  readonly topicOfNode: Int32Array;
  /** The prefix node whose path is the topic. */
  readonly nodeOfTopic: Int32Array;
  /** The leaf holding the topic alone (its prefix node or its SELF node). */
  readonly leafOfTopic: Int32Array;
  /** Children of node u are children[childStart[u] .. childStart[u] + childCount[u]). */
  readonly childStart: Int32Array;
  readonly childCount: Int32Array;
  readonly children: Int32Array;
  /** Topics in the node's subtree. */
  readonly topicCount: Int32Array;
  /** Bytes of the topics in the node's subtree. */
  readonly bytes: Float64Array;
  /** Partition roots in id order, and the partition each one names. */
  readonly partitionRoots: Int32Array;
  readonly partitionNames: readonly string[];
}

/** Builds the prefix tree of `table`. */
export function buildTopicTree(table: VolumeTable): TopicTree {
  const topicTotal = table.topics.length;
  const parent: number[] = [];
  const depth: number[] = [];
  const path: string[] = [];
  const nodeOfTopic = new Int32Array(topicTotal);
  const addNode = (nodePath: string, nodeParent: number, nodeDepth: number): number => {
    const node = path.length;
    path.push(nodePath);
    parent.push(nodeParent);
    depth.push(nodeDepth);
    return node;
  };
  // The table is sorted segment by segment, so each subtree is a contiguous run of topics: a walk
  // keeping the previous topic's path nodes creates every prefix once, with no lookup table.
  const previous: number[] = [];
  for (let topic = 0; topic < topicTotal; topic++) {
    const name = table.topics[topic];
    let node = -1;
    let segments = 0;
    let from = 0;
    let shared = true;
    for (;;) {
      const slash = name.indexOf("/", from);
      const end = slash < 0 ? name.length : slash;
      const known = shared ? previous[segments] : undefined;
      segments++;
      if (known !== undefined && path[known].length === end && name.startsWith(path[known])) {
        node = known;
      } else {
        shared = false;
        node = addNode(name.slice(0, end), node, segments);
        previous[segments - 1] = node;
      }
      if (slash < 0) break;
      from = slash + 1;
    }
    previous.length = segments;
    nodeOfTopic[topic] = node;
  }
  const prefixCount = path.length;
  const hasChildren = new Uint8Array(prefixCount);
  for (let node = 0; node < prefixCount; node++)
    if (parent[node] >= 0) hasChildren[parent[node]] = 1;
  const leafOfTopic = new Int32Array(topicTotal);
  for (let topic = 0; topic < topicTotal; topic++) {
    const node = nodeOfTopic[topic];
    leafOfTopic[topic] = hasChildren[node] === 1 ? addNode(path[node], node, depth[node]) : node;
  }
  const nodeCount = path.length;
  const kind = new Uint8Array(nodeCount).fill(NODE_SELF, prefixCount);
  const topicOfNode = new Int32Array(nodeCount).fill(-1);
  const topicCount = new Int32Array(nodeCount);
  const bytes = new Float64Array(nodeCount);
  for (let topic = 0; topic < topicTotal; topic++) {
    const leaf = leafOfTopic[topic];
    topicOfNode[leaf] = topic;
    topicCount[leaf] = 1;
    bytes[leaf] = table.bytes[topic];
  }
  const parentArray = Int32Array.from(parent);
  for (let node = nodeCount - 1; node >= 0; node--) {
    const up = parentArray[node];
    assert(up < node, "a node's parent is created before it");
    if (up >= 0) {
      topicCount[up] += topicCount[node];
      bytes[up] += bytes[node];
    }
  }
  const { childStart, childCount, children } = childLists(parentArray, bytes);
  const roots: number[] = [];
  const names: string[] = [];
  for (let node = 0; node < nodeCount; node++) {
    const isRoot =
      kind[node] === NODE_PREFIX
        ? depth[node] === PARTITION_SEGMENTS || (depth[node] === 1 && topicOfNode[node] >= 0)
        : depth[node] === 1;
    if (isRoot) {
      roots.push(node);
      names.push(path[node]);
    }
  }
  return {
    table,
    nodeCount,
    parent: parentArray,
    depth: Uint8Array.from(depth),
    kind,
    path,
    topicOfNode,
    nodeOfTopic,
    leafOfTopic,
    childStart,
    childCount,
    children,
    topicCount,
    bytes,
    partitionRoots: Int32Array.from(roots),
    partitionNames: names,
  };
}

/** Children lists (CSR), each ordered by subtree bytes descending, ties by node id. */
function childLists(
  parent: Int32Array,
  bytes: Float64Array,
): { childStart: Int32Array; childCount: Int32Array; children: Int32Array } {
  const nodeCount = parent.length;
  const childCount = new Int32Array(nodeCount);
  for (let node = 0; node < nodeCount; node++) if (parent[node] >= 0) childCount[parent[node]]++;
  const childStart = new Int32Array(nodeCount);
  let next = 0;
  for (let node = 0; node < nodeCount; node++) {
    childStart[node] = next;
    next += childCount[node];
  }
  const children = new Int32Array(next);
  const filled = new Int32Array(nodeCount);
  for (let node = 0; node < nodeCount; node++) {
    const up = parent[node];
    if (up >= 0) children[childStart[up] + filled[up]++] = node; // ascending ids
  }
  for (let node = 0; node < nodeCount; node++) {
    if (childCount[node] < 2) continue;
    const list = children.subarray(childStart[node], childStart[node] + childCount[node]);
    const sorted = Array.from(list).sort((a, b) => bytes[b] - bytes[a] || a - b);
    list.set(sorted);
  }
  return { childStart, childCount, children };
}
