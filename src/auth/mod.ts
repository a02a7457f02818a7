/**
 * auth: users, their credentials and their topic permissions (`aria serve --users FILE`), and
 * the throttle of failed sign-ins. Pure: hashing comes in as a port (the runtime's token_kdf).
 */
export { JsonSourceError, parseJsonSource, type JsonNode } from "./json_source.ts";
export { Permissions, type Rule } from "./permissions.ts";
export {
  AUTH_FAILURE_DELAY_US_MAX,
  AUTH_FAILURE_DELAY_US_MIN,
  FailureThrottle,
} from "./throttle.ts";
export { type SignIn, type TokenVerifier, Users } from "./users.ts";
export {
  formatUsersFile,
  parseUsersFile,
  ROLES,
  type Role,
  type RuleText,
  type User,
  type UserRecord,
  userFromRecord,
  type UsersParse,
} from "./users_file.ts";
