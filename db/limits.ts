/**
 * An account's effective limits: its plan's numbers, overridden per account by
 * the operator where set.
 */
import type { Tx } from './database.js';

/** Every per-plan limit of SPEC.md section 8. */
export interface Limits {
  maxWorkspaces: number;
  maxFiles: number;
  maxStorageBytes: number;
  maxFileBytes: number;
  /** Read-tool requests per second per credential. */
  readRatePerCredential: number;
  /** Read-tool requests per second per account. */
  readRatePerAccount: number;
}

/** The limit columns, in the order of `Limits`, as plan and account columns share their names. */
export const LIMIT_COLUMNS = [
  ['maxWorkspaces', 'max_workspaces'],
  ['maxFiles', 'max_files'],
  ['maxStorageBytes', 'max_storage_bytes'],
  ['maxFileBytes', 'max_file_bytes'],
  ['readRatePerCredential', 'read_rate_per_credential'],
  ['readRatePerAccount', 'read_rate_per_account'],
] as const satisfies ReadonlyArray<readonly [keyof Limits, string]>;

const SELECT_LIMITS = `SELECT ${LIMIT_COLUMNS.map(([key, col]) => `coalesce(a.${col}, p.${col})::float8 AS "${key}"`).join(', ')}
  FROM accounts a JOIN plans p ON p.name = a.plan WHERE a.id = $1`;

/** The limits of the transaction's account. */
export async function accountLimits(tx: Tx, accountId: string): Promise<Limits> {
  const { rows } = await tx.query<Limits>(SELECT_LIMITS, [accountId]);
  if (rows.length === 0) throw new Error(`account ${accountId} not found`);
  return rows[0];
}
