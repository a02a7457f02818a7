/**
 * Aria's public library API. Import from here, not from src/ folders: what is exported here is
 * what Aria promises to keep stable.
 */
export { Filter, FilterMatcher, TopicTable, partitionOf, validateTopic, type FilterEntry, type FilterParse } from "./src/topic/mod.ts";
export { Tip, type TipCursor, type TipOptions, type TipRead, type TipStats } from "./src/tip/mod.ts";
