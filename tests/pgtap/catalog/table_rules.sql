-- Rules every table in schema ordertimeout follows: a primary key, constraint
-- and index names chosen by hand (not PostgreSQL's generated ones), and no
-- table privilege for PUBLIC or the application role.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

CREATE TEMP VIEW generated_names AS
SELECT c.conrelid::regclass::text AS on_table, c.conname AS name
FROM pg_catalog.pg_constraint AS c
WHERE c.connamespace = 'ordertimeout'::regnamespace
  AND c.conname ~ '_(check|fkey|key|excl)\d*$'       -- what CHECK, REFERENCES, UNIQUE, EXCLUDE are named by default
UNION ALL
SELECT i.indrelid::regclass::text, i.indexrelid::regclass::text
FROM pg_catalog.pg_index AS i
JOIN pg_catalog.pg_class AS t ON t.oid = i.indrelid
WHERE t.relnamespace = 'ordertimeout'::regnamespace
  AND i.indexrelid::regclass::text ~ '_idx\d*$';    -- what CREATE INDEX without a name gives

SELECT cmp_ok((SELECT count(*)::integer FROM pg_catalog.pg_constraint WHERE connamespace = 'ordertimeout'::regnamespace),
    '>=', 50, 'the rules see the constraints');
SELECT is_empty($$SELECT * FROM generated_names$$,
    'every constraint and index has a name that says what it protects');
SELECT is_empty(
    $$SELECT c.relname FROM pg_catalog.pg_class AS c
       WHERE c.relnamespace = 'ordertimeout'::regnamespace AND c.relkind = 'r'
         AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint AS k WHERE k.conrelid = c.oid AND k.contype = 'p')$$,
    'every table has a primary key');
SELECT is_empty(
    $$SELECT c.relname, a.privilege_type FROM pg_catalog.pg_class AS c, aclexplode(c.relacl) AS a
       WHERE c.relnamespace = 'ordertimeout'::regnamespace AND a.grantee = 0$$,
    'PUBLIC has no privilege on any table or view');
SELECT is_empty(
    $$SELECT c.relname, p.privilege
        FROM pg_catalog.pg_class AS c
       CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p(privilege)
       WHERE (c.relnamespace = 'ordertimeout'::regnamespace OR (c.relnamespace = 'public'::regnamespace AND c.relname LIKE 'river\_%'))
         AND c.relkind IN ('r', 'v')
         AND has_table_privilege('ordertimeout_app', c.oid, p.privilege)$$,
    'ordertimeout_app has no privilege on any ordertimeout or River table');
SELECT is_empty(
    $$SELECT c.relname, p.privilege
        FROM pg_catalog.pg_class AS c
       CROSS JOIN unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p(privilege)
       CROSS JOIN unnest(ARRAY['ordertimeout_sidecar', 'ordertimeout_admin']) AS r(role)
       WHERE c.relnamespace = 'ordertimeout'::regnamespace
         AND c.relkind = 'r'
         AND has_table_privilege(r.role, c.oid, p.privilege)$$,
    'no role may write an ordertimeout table directly: only through the API');
SELECT is_empty(
    $$SELECT r.rolname FROM pg_catalog.pg_roles AS r
       WHERE r.rolname IN ('ordertimeout_app', 'ordertimeout_sidecar', 'ordertimeout_admin') AND r.rolcanlogin$$,
    'none of the roles can log in');

-- The name rule is not vacuous: an unnamed CHECK is caught.
ALTER TABLE ordertimeout.stock ADD CHECK (sku <> 'forbidden');
SELECT results_eq($$SELECT name FROM generated_names$$, $$VALUES ('stock_sku_check'::name)$$,
    'a constraint added without a name is reported');

SELECT * FROM finish();
ROLLBACK;
