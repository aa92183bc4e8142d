-- Rules every function in schema ordertimeout follows, checked in the catalog
-- so that a new function cannot forget them. Each assertion lists the
-- offenders.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(16);

CREATE TEMP VIEW fn AS
SELECT p.oid,
       p.oid::regprocedure::text AS signature,
       p.proname,
       p.prosecdef,
       p.prokind,
       p.proacl,
       (SELECT c FROM unnest(p.proconfig) AS c WHERE c LIKE 'search_path=%') AS search_path,
       -- A private IMMUTABLE SQL function without SET is inlined into its
       -- caller's statement (a SET clause would stop that), so it runs under
       -- the caller's pinned search_path.
       (p.proname LIKE '\_%' AND p.prolang = (SELECT l.oid FROM pg_catalog.pg_language AS l WHERE l.lanname = 'sql')
        AND p.provolatile = 'i' AND NOT p.prosecdef AND p.proconfig IS NULL) AS inlined
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'ordertimeout'::regnamespace;

SELECT cmp_ok((SELECT count(*)::integer FROM fn), '>=', 30, 'the rules see the functions');

-- Procedures (prokind p) that commit can carry no SET clause and cannot be
-- SECURITY DEFINER: they have their own rule below.
SELECT is_empty($$SELECT signature FROM fn WHERE search_path IS NULL AND prokind <> 'p' AND NOT inlined$$,
    'every function pins search_path (but private IMMUTABLE SQL functions, inlined into their callers)');
SELECT is_empty($$SELECT signature, search_path FROM fn WHERE search_path <> 'search_path=pg_catalog, pg_temp'$$,
    'every search_path is "pg_catalog, pg_temp": objects are schema-qualified');
SELECT is_empty($$SELECT signature, search_path FROM fn WHERE prosecdef AND search_path !~ 'pg_temp$'$$,
    'every SECURITY DEFINER function has pg_temp last in its search_path');
SELECT is_empty(
    $$SELECT signature FROM fn
       WHERE proacl IS NULL   -- the default ACL grants EXECUTE to PUBLIC
          OR EXISTS (SELECT 1 FROM aclexplode(proacl) AS a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')$$,
    'no function is executable by PUBLIC');
SELECT is_empty($$SELECT signature FROM fn WHERE proname LIKE '\_%' AND prosecdef$$,
    'every private function (_name) is SECURITY INVOKER');
SELECT is_empty(
    $$SELECT signature, r.rolname FROM fn
        CROSS JOIN pg_catalog.pg_roles AS r
       WHERE fn.proname LIKE '\_%'
         AND r.rolname IN ('ordertimeout_app', 'ordertimeout_sidecar', 'ordertimeout_admin')
         AND has_function_privilege(r.oid, fn.oid, 'EXECUTE')$$,
    'no private function is executable by ordertimeout_app, _sidecar or _admin');
SELECT is_empty($$SELECT signature FROM fn WHERE proname NOT LIKE '\_%' AND NOT prosecdef AND prokind <> 'p'$$,
    'every API function is SECURITY DEFINER (the roles have no table privileges)');
SELECT is_empty(
    $$SELECT signature FROM fn
       WHERE prokind = 'p'
         AND (prosecdef OR (SELECT p.proconfig FROM pg_catalog.pg_proc AS p WHERE p.oid = fn.oid) IS NOT NULL
              OR pg_catalog.pg_get_functiondef(oid) NOT LIKE '%set_config(''search_path'', ''pg_catalog, pg_temp'', true)%')$$,
    'every procedure is SECURITY INVOKER without SET, and pins search_path itself with set_config');
SELECT is_empty(
    $$SELECT signature FROM fn
       WHERE proname NOT LIKE '\_%'
         AND NOT has_function_privilege('ordertimeout_admin', oid, 'EXECUTE')$$,
    'ordertimeout_admin may execute every API function');
SELECT is_empty(
    $$SELECT signature FROM fn
       WHERE proname NOT LIKE '\_%'
         AND obj_description(oid, 'pg_proc') IS NULL$$,
    'every API function has a comment');
SELECT is_empty(
    $$SELECT signature FROM fn
       WHERE proname NOT LIKE '\_%'
         AND proname !~ '^[a-z]+(_[a-z]+)*$'$$,
    'API function names are lowercase verb_object words');
SELECT results_eq(
    $$SELECT proname::text COLLATE "default", c COLLATE "default"
        FROM pg_catalog.pg_proc AS p, unnest(p.proconfig) AS c
       WHERE p.pronamespace = 'ordertimeout'::regnamespace
         AND c LIKE 'plan_cache_mode=%'
       ORDER BY 1$$,
    $$VALUES ('begin_payment', 'plan_cache_mode=force_generic_plan'),
             ('cancel_checked', 'plan_cache_mode=force_generic_plan'),
             ('cancel_order', 'plan_cache_mode=force_generic_plan'),
             ('confirm_payment', 'plan_cache_mode=force_generic_plan'),
             ('create_order', 'plan_cache_mode=force_generic_plan'),
             ('extend_deadline', 'plan_cache_mode=force_generic_plan'),
             ('fail_payment', 'plan_cache_mode=force_generic_plan'),
             ('finish_refund', 'plan_cache_mode=force_generic_plan'),
             ('resolve_conflict', 'plan_cache_mode=force_generic_plan'),
             ('sweep_due', 'plan_cache_mode=force_generic_plan')$$,
    'single-order functions and the sweep plan generically (the sweep switches to custom plans for a backlog: see sweep_due.sql)');
-- sweep_due's switch for a backlog (set_config(..., true)) is undone when the
-- call returns only for the settings its SET clauses name; the functions that
-- share its helpers' cached plans plan the same way.
SELECT results_eq(
    $$SELECT proname::text COLLATE "default", c COLLATE "default"
        FROM pg_catalog.pg_proc AS p, unnest(p.proconfig) AS c
       WHERE p.pronamespace = 'ordertimeout'::regnamespace
         AND p.proname IN ('sweep_due', 'cancel_order', 'cancel_checked')
         AND c ~ '^(enable_seqscan|enable_hashjoin|enable_mergejoin|jit)='
       ORDER BY 1, 2$$,
    $$VALUES ('cancel_checked', 'enable_hashjoin=off'), ('cancel_checked', 'enable_mergejoin=off'),
             ('cancel_checked', 'enable_seqscan=off'), ('cancel_checked', 'jit=off'),
             ('cancel_order', 'enable_hashjoin=off'), ('cancel_order', 'enable_mergejoin=off'),
             ('cancel_order', 'enable_seqscan=off'), ('cancel_order', 'jit=off'),
             ('sweep_due', 'enable_hashjoin=off'), ('sweep_due', 'enable_mergejoin=off'),
             ('sweep_due', 'enable_seqscan=off'), ('sweep_due', 'jit=off')$$,
    'the sweep and the cancels that share its helpers plan for index access, without JIT');

-- The rules are not vacuous: a careless new function breaks them.
CREATE FUNCTION ordertimeout.careless() RETURNS integer LANGUAGE sql AS 'SELECT 1';
SELECT results_eq($$SELECT proname FROM fn WHERE search_path IS NULL AND prokind <> 'p' AND NOT inlined$$, $$VALUES ('careless'::name)$$,
    'a function without search_path is reported');
SELECT results_eq($$SELECT proname FROM fn WHERE proacl IS NULL$$, $$VALUES ('careless'::name)$$,
    'a function with the default ACL (EXECUTE for PUBLIC) is reported');

SELECT * FROM finish();
ROLLBACK;
