/**
 * Creates the two roles and the database on a cluster where we hold the
 * superuser: the embedded default, and the tests. An external PostgreSQL is
 * provisioned by its operator instead (see docker-compose.yml).
 */
import pg from 'pg';
import type { DatabaseTargets } from './database.js';

/** Names of the database and the two roles to create. */
export interface ProvisionNames {
  database: string;
  ownerRole: string;
  appRole: string;
}

/** Makes sure the roles and the database exist (idempotent) and returns how each role connects. */
export async function provisionDatabase(superuser: { host: string; port: number; user: string }, names: ProvisionNames): Promise<DatabaseTargets> {
  const client = new pg.Client({ ...superuser, database: 'postgres' });
  await client.connect();
  try {
    const id = (name: string) => client.escapeIdentifier(name);
    for (const role of [names.ownerRole, names.appRole]) {
      const exists = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
      if (exists.rowCount === 0) {
        await client.query(`CREATE ROLE ${id(role)} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOREPLICATION`);
      }
    }
    const db = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [names.database]);
    if (db.rowCount === 0) {
      await client.query(`CREATE DATABASE ${id(names.database)} OWNER ${id(names.ownerRole)} ENCODING 'UTF8' TEMPLATE template0`);
      await client.query(`REVOKE ALL ON DATABASE ${id(names.database)} FROM PUBLIC`);
      await client.query(`GRANT CONNECT ON DATABASE ${id(names.database)} TO ${id(names.appRole)}`);
    }
  } finally {
    await client.end();
  }
  const base = { host: superuser.host, port: superuser.port, database: names.database };
  return { owner: { ...base, user: names.ownerRole }, app: { ...base, user: names.appRole } };
}
