-- A revocation holds on every node from the next request: after its commit, the revoking
-- process numbers a request to drop cached credentials (NOTIFY vfs_invalidate
-- 'credentials <n>', n from this sequence), and each node records in its row the last number
-- after which it dropped them; the revoking process waits until every live node has
-- (db/nodes.ts).
CREATE SEQUENCE credential_drops;
ALTER TABLE nodes ADD COLUMN credentials_dropped bigint NOT NULL DEFAULT 0;
