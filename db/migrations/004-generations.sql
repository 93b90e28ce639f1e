-- File generations come from one sequence, so that (workspace, path,
-- generation) never repeats: when a path is deleted and uploaded again, an
-- ingest job still running for the deleted file cannot be taken for the new
-- one (under the per-path counter both would be generation 1).
CREATE SEQUENCE file_generations;
SELECT setval('file_generations', greatest((SELECT max(generation) FROM files), (SELECT max(generation) FROM ingest_jobs), 1));
ALTER TABLE files ALTER COLUMN generation SET DEFAULT nextval('file_generations');
COMMENT ON COLUMN files.generation IS 'Drawn from file_generations at every upload of the path; an ingest job carries the generation it was made for.';
