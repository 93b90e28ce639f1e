-- Originals packed together (an S3 store): the small originals of one batch of uploads go to
-- the store as one object, `packs/<account>/<id>`, and each blob's place in it is a row here.
-- A blob with no row is its own object, `blobs/<account>/<sha[0:2]>/<sha>`. A pack is removed
-- once no row names it (ingest/uploads.ts).
CREATE TABLE blob_packs (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  sha256 text NOT NULL,
  pack text COLLATE "C" NOT NULL,
  byte_offset bigint NOT NULL,
  size_bytes bigint NOT NULL,
  PRIMARY KEY (account_id, sha256)
);
CREATE INDEX blob_packs_pack ON blob_packs (account_id, pack);
ALTER TABLE blob_packs ENABLE ROW LEVEL SECURITY;
ALTER TABLE blob_packs FORCE ROW LEVEL SECURITY;
CREATE POLICY owner_all ON blob_packs TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE POLICY tenant ON blob_packs USING (account_id = current_account()) WITH CHECK (account_id = current_account());
