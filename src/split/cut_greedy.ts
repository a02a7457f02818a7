/**
 * Greedy cutting: grows a plan one store at a time, always making the cut that saves the most
 * waste, until the store budget is spent or no cut saves anything.
 *
 * A region is one store: an anchor node (a cut node, see cut_plan.ts) and a range of its child
 * slots (children ordered by subtree bytes, descending); the store holds the topics under those
 * children that no deeper region holds (or the anchor's topic, for a leaf anchor). A region
 * of n topics and B bytes wastes (n - 1) * B. Two kinds of cut split a region in two:
 *
 *   node cut   a node v below the anchor becomes the anchor of a new region holding v's residual
 *              part (all of v's children): heavy topics and subtrees get their own store;
 *   range cut  the anchor's range [lo, hi) becomes [lo, p) and [p, hi), each of >= 2 children:
 *              light siblings share stores, lighter ones with lighter ones.
 *
 * Moving a part (nx, bx) out of a region (n, B) saves exactly the cross term
 *
 *     gain = nx * (B - bx) + (n - nx) * bx          (> 0 iff 0 < nx < n and some bytes move)
 *
 * so every useful cut adds exactly one store and the budget is met exactly, with no threshold to
 * search for. Regions wait in a GainHeap keyed by their best gain; a cut changes only the region
 * it splits and the new one, so only those two are searched again.
 *
 * The search of a region walks its nodes, pruned: below a node u of residual (nu, bu),
 * gain <= nu * B + bu * n; below the anchor's level, one test skips a node's remaining children
 * (sorted by bytes, with the largest topic count from there on); cut or emptied children are
 * skipped in amortised O(1) (union-find over the child slots). Invariants: resN/resB of an uncut
 * node are its residual part of its region; residuals only shrink, so a dead (cut or empty)
 * child stays dead; a region's ranges never overlap another region of the same anchor.
 */
import { assert } from "../stdx/assert.ts";
import { partitionOf } from "../topic/mod.ts";
import { GainHeap } from "./gain_heap.ts";
import { groupPlan, type GroupName, type PlannedSubtreeStore } from "./plan.ts";
import { subtreeStoreIdOf } from "./subtree_store_id.ts";
import { NODE_SELF, type TopicTree } from "./topic_tree.ts";

/** A plan grown by greedyCuts. */
export interface GreedyCuts {
  /** Non-empty regions: the plan's store count. */
  stores: number;
  /** Sum over stores of (topics - 1) * bytes: the plan's total topic waste. */
  wastedBytes: number;
  /** The plan's stores (built on demand: only the winning candidate pays for it). */
  planSubtreeStores(): PlannedSubtreeStore[];
}

/** Options of greedyCuts. */
export interface GreedyOptions {
  /**
   * Search without pruning or skip links (every live child by a linear scan): the naive reference
   * the tests hold the fast search to. Picks the same cuts, only slower.
   */
  reference?: boolean;
}

/** Grows the stores of the cut set `initialCuts` (partition roots included) greedily up to `budget`. */
export function greedyCuts(
  tree: TopicTree,
  initialCuts: Uint8Array,
  budget: number,
  options: GreedyOptions = {},
): GreedyCuts {
  const state = new RegionState(tree, initialCuts, options.reference === true);
  let stores = state.nonEmptyRegions();
  if (stores < budget) {
    const heap = new GainHeap(tree.nodeCount + tree.table.topics.length);
    for (let region = 0; region < state.regionCount; region++) state.push(heap, region);
    while (stores < budget && heap.size > 0) {
      const region = heap.topRegion();
      const move = heap.topCut();
      heap.pop();
      const added = move >= 0 ? state.cutNode(region, move) : state.cutRange(region, -move - 1);
      stores++;
      state.push(heap, region);
      state.push(heap, added);
    }
  }
  assert(stores === state.nonEmptyRegions(), "every cut adds one non-empty store");
  return {
    stores,
    wastedBytes: state.wastedBytes(),
    planSubtreeStores: () => state.planSubtreeStores(),
  };
}

/** Residuals, regions and the pruned best-cut search; see the file comment. */
class RegionState {
  readonly cut: Uint8Array;
  readonly resN: Int32Array;
  readonly resB: Float64Array;
  regionCount = 0;
  private readonly anchor: Int32Array;
  private readonly lo: Int32Array;
  private readonly hi: Int32Array;
  private readonly regionN: Int32Array;
  private readonly regionB: Float64Array;
  private readonly tree: TopicTree;
  /** Union-find over child slots: skip[s] === s when the child in slot s is alive. */
  private readonly skip: Int32Array;
  private readonly slotOfNode: Int32Array;
  /** Largest subtree topic count among the children in slot s and after it (same parent). */
  private readonly suffixTopicsMax: Int32Array;
  private readonly stack: Int32Array;
  private readonly reference: boolean;
  private bestMove = 0;

  constructor(tree: TopicTree, initialCuts: Uint8Array, reference: boolean) {
    assert(initialCuts.length === tree.nodeCount, "one cut flag per node");
    for (let i = 0; i < tree.partitionRoots.length; i++)
      assert(initialCuts[tree.partitionRoots[i]] === 1, "partition roots are cut");
    const { nodeCount, children, childStart, childCount, parent, topicOfNode, table } = tree;
    this.tree = tree;
    this.reference = reference;
    this.cut = Uint8Array.from(initialCuts);
    this.resN = new Int32Array(nodeCount);
    this.resB = new Float64Array(nodeCount);
    for (let node = nodeCount - 1; node >= 0; node--) {
      const topic = topicOfNode[node];
      if (topic >= 0) {
        this.resN[node]++;
        this.resB[node] += table.bytes[topic];
      }
      const up = parent[node];
      if (this.cut[node] === 0 && up >= 0) {
        this.resN[up] += this.resN[node];
        this.resB[up] += this.resB[node];
      }
    }
    const regionsMax = nodeCount + table.topics.length; // each range cut leaves >= 1 topic per side
    this.anchor = new Int32Array(regionsMax);
    this.lo = new Int32Array(regionsMax);
    this.hi = new Int32Array(regionsMax);
    this.regionN = new Int32Array(regionsMax);
    this.regionB = new Float64Array(regionsMax);
    for (let node = 0; node < nodeCount; node++) {
      if (this.cut[node] === 1)
        this.addRegion(
          node,
          childStart[node],
          childStart[node] + childCount[node],
          this.resN[node],
          this.resB[node],
        );
    }
    this.skip = new Int32Array(children.length + 1);
    this.slotOfNode = new Int32Array(nodeCount).fill(-1);
    this.suffixTopicsMax = new Int32Array(children.length);
    for (let slot = 0; slot <= children.length; slot++) this.skip[slot] = slot;
    for (let node = 0; node < nodeCount; node++) {
      let topicsMax = 0;
      for (let slot = childStart[node] + childCount[node] - 1; slot >= childStart[node]; slot--) {
        const child = children[slot];
        this.slotOfNode[child] = slot;
        topicsMax = Math.max(topicsMax, tree.topicCount[child]);
        this.suffixTopicsMax[slot] = topicsMax;
        if (this.cut[child] === 1 || this.resN[child] === 0) this.skip[slot] = slot + 1;
      }
    }
    this.stack = new Int32Array(nodeCount);
  }

  /** Regions holding at least one topic. */
  nonEmptyRegions(): number {
    let count = 0;
    for (let region = 0; region < this.regionCount; region++) if (this.regionN[region] > 0) count++;
    return count;
  }

  /** Sum over regions of (n - 1) * B. */
  wastedBytes(): number {
    let total = 0;
    for (let region = 0; region < this.regionCount; region++) {
      if (this.regionN[region] > 1) total += (this.regionN[region] - 1) * this.regionB[region];
    }
    return total;
  }

  /** Queues `region` with its best cut, if any cut of it saves waste. */
  push(heap: GainHeap, region: number): void {
    const gain = this.bestCut(region);
    if (gain > 0) heap.push(gain, region, this.bestMove);
  }

  /** Node cut: `node` (below `region`'s anchor) becomes the anchor of a new region; returns it. */
  cutNode(region: number, node: number): number {
    const topics = this.resN[node];
    const bytes = this.resB[node];
    assert(
      this.cut[node] === 0 && topics > 0 && topics < this.regionN[region],
      "a cut splits its region in two",
    );
    this.cut[node] = 1;
    this.kill(node);
    for (let up = this.tree.parent[node]; up !== this.anchor[region]; up = this.tree.parent[up]) {
      assert(up >= 0, "a cut node lies below its region's anchor");
      this.resN[up] -= topics;
      this.resB[up] -= bytes;
      if (this.resN[up] === 0) this.kill(up);
    }
    this.regionN[region] -= topics;
    this.regionB[region] -= bytes;
    const start = this.tree.childStart[node];
    return this.addRegion(node, start, start + this.tree.childCount[node], topics, bytes);
  }

  /** Range cut: the slots from `slot` on leave `region` for a new region; returns it. */
  cutRange(region: number, slot: number): number {
    assert(this.lo[region] < slot && slot < this.hi[region], "a range cut lies inside the range");
    let topics = 0;
    let bytes = 0;
    for (let at = this.find(slot); at < this.hi[region]; at = this.find(at + 1)) {
      topics += this.resN[this.tree.children[at]];
      bytes += this.resB[this.tree.children[at]];
    }
    assert(topics > 0 && topics < this.regionN[region], "a cut splits its region in two");
    const added = this.addRegion(this.anchor[region], slot, this.hi[region], topics, bytes);
    this.hi[region] = slot;
    this.regionN[region] -= topics;
    this.regionB[region] -= bytes;
    return added;
  }

  /**
   * The largest gain of one cut of `region` (0 if none); the move is left in bestMove: a node id
   * for a node cut, -(slot + 1) for a range cut at slot.
   */
  private bestCut(region: number): number {
    const { children, childStart, childCount, bytes: subtreeBytes } = this.tree;
    const { resN, resB, suffixTopicsMax, stack } = this;
    const n = this.regionN[region];
    const total = this.regionB[region];
    let best = 0;
    this.bestMove = 0;
    let top = 0;
    // The anchor's level: every live child is a node-cut candidate and a range-cut boundary.
    const end = this.hi[region];
    let members = 0;
    for (let slot = this.find(this.lo[region]); slot < end; slot = this.find(slot + 1)) members++;
    let prefixN = 0;
    let prefixB = 0;
    let seen = 0;
    for (let slot = this.find(this.lo[region]); slot < end; slot = this.find(slot + 1)) {
      const child = children[slot];
      const topics = resN[child];
      const bytes = resB[child];
      if (seen >= 2 && members - seen >= 2) {
        const gain = prefixN * (total - prefixB) + (n - prefixN) * prefixB;
        if (gain > best) {
          best = gain;
          this.bestMove = -slot - 1;
        }
      }
      const gain = topics * (total - bytes) + (n - topics) * bytes;
      if (gain > best) {
        best = gain;
        this.bestMove = child;
      }
      if (topics > 1) stack[top++] = child;
      prefixN += topics;
      prefixB += bytes;
      seen++;
    }
    // Below it: node cuts only, pruned by the bound.
    const prune = !this.reference;
    while (top > 0) {
      const node = stack[--top];
      if (prune && resN[node] * total + resB[node] * n <= best) continue;
      const last = childStart[node] + childCount[node];
      for (let slot = this.find(childStart[node]); slot < last; slot = this.find(slot + 1)) {
        const child = children[slot];
        // Later siblings have no more bytes (sorted) and no more topics (suffix max) than this bound.
        if (prune && suffixTopicsMax[slot] * total + subtreeBytes[child] * n <= best) break;
        const topics = resN[child];
        const bytes = resB[child];
        const gain = topics * (total - bytes) + (n - topics) * bytes;
        if (gain > best) {
          best = gain;
          this.bestMove = child;
        }
        if (topics > 1 && (!prune || topics * total + bytes * n > best)) stack[top++] = child;
      }
    }
    return best;
  }

  /** The plan's stores: one per non-empty region, named by anchor (+ `~i` when it has several). */
  planSubtreeStores(): PlannedSubtreeStore[] {
    const { tree } = this;
    const root = new Uint8Array(tree.nodeCount);
    for (let i = 0; i < tree.partitionRoots.length; i++) root[tree.partitionRoots[i]] = 1;
    // Regions of each anchor in slot order, so `~1`, `~2`, ... follow the bytes order.
    const order = Array.from({ length: this.regionCount }, (_, region) => region).filter(
      (region) => this.regionN[region] > 0,
    );
    order.sort((a, b) => this.anchor[a] - this.anchor[b] || this.lo[a] - this.lo[b]);
    const groups: GroupName[] = [];
    const groupOfRegion = new Int32Array(this.regionCount).fill(-1);
    const owner = new Int32Array(tree.nodeCount).fill(-1);
    let runStart = 0;
    for (let index = 0; index < order.length; index++) {
      const region = order[index];
      const node = this.anchor[region];
      if (index > 0 && this.anchor[order[index - 1]] !== node) runStart = index;
      const several =
        index > runStart || (index + 1 < order.length && this.anchor[order[index + 1]] === node);
      const ordinal = index - runStart + 1;
      const exact = tree.kind[node] === NODE_SELF && root[node] === 0;
      groupOfRegion[region] = groups.length;
      groups.push({
        id: subtreeStoreIdOf(tree.path[node], exact) + (several ? `~${ordinal}` : ""),
        partition: partitionOf(tree.path[node]),
      });
      if (tree.topicOfNode[node] >= 0) owner[node] = groupOfRegion[region];
      for (let slot = this.lo[region]; slot < this.hi[region]; slot++) {
        const child = tree.children[slot];
        if (this.cut[child] === 0) owner[child] = groupOfRegion[region];
      }
    }
    for (let node = 0; node < tree.nodeCount; node++) {
      const up = tree.parent[node];
      if (owner[node] < 0 && this.cut[node] === 0 && up >= 0) owner[node] = owner[up];
    }
    const groupOfTopic = new Int32Array(tree.table.topics.length);
    for (let topic = 0; topic < groupOfTopic.length; topic++) {
      groupOfTopic[topic] = owner[tree.leafOfTopic[topic]];
      assert(groupOfTopic[topic] >= 0, "every topic lies in a region");
    }
    return groupPlan(tree.table, groupOfTopic, groups);
  }

  private addRegion(anchor: number, lo: number, hi: number, topics: number, bytes: number): number {
    const region = this.regionCount++;
    this.anchor[region] = anchor;
    this.lo[region] = lo;
    this.hi[region] = hi;
    this.regionN[region] = topics;
    this.regionB[region] = bytes;
    return region;
  }

  /** Marks `node`'s slot dead in its parent's child list. */
  private kill(node: number): void {
    const slot = this.slotOfNode[node];
    if (slot >= 0) this.skip[slot] = slot + 1;
  }

  /** The first live slot at or after `slot` (path halving; a linear scan in reference mode). */
  private find(slot: number): number {
    if (this.reference) {
      const { children } = this.tree;
      while (
        slot < children.length &&
        (this.cut[children[slot]] === 1 || this.resN[children[slot]] === 0)
      )
        slot++;
      return slot;
    }
    const skip = this.skip;
    while (skip[slot] !== slot) {
      skip[slot] = skip[skip[slot]];
      slot = skip[slot];
    }
    return slot;
  }
}
