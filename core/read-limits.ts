/**
 * Limits of the read tools that the interface states (api/contract/read-params.ts) and the engine
 * applies (engine/tool-find.ts): one definition for both.
 */

/** Paths `find` prints when `head_limit` is not given. */
export const DEFAULT_FIND_LIMIT = 100;
/** Largest accepted `find` `head_limit`. */
export const MAX_FIND_LIMIT = 1000;
