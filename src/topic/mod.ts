/** topic: names, validation, partitions, filters and interning. */
export { isUnder, partitionOf, validateTopic } from "./topic.ts";
export {
  ANY_SEGMENT,
  entriesIntersect,
  entryCovers,
  Filter,
  type FilterEntry,
  type FilterParse,
} from "./filter.ts";
export { dottedTopicAdvice, foreignFilterAdvice } from "./foreign_syntax.ts";
export { TopicTable, type InternResult, type TopicStats } from "./topic_table.ts";
export { FilterMatcher } from "./filter_matcher.ts";
export { FilterIndex } from "./filter_index.ts";
