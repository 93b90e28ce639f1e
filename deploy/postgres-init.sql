-- Run once by the postgres container on an empty volume: the two roles of DESIGN.md section 2.
-- The owner role owns the database and runs migrations; the application role owns nothing.
CREATE ROLE vfs_owner LOGIN PASSWORD 'owner-secret' NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
CREATE ROLE vfs_app LOGIN PASSWORD 'app-secret' NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
CREATE DATABASE agent_vfs OWNER vfs_owner ENCODING 'UTF8' TEMPLATE template0;
REVOKE ALL ON DATABASE agent_vfs FROM PUBLIC;
GRANT CONNECT ON DATABASE agent_vfs TO vfs_app;
