-- Removes ordertimeout: its schema with every table, function, type and view,
-- and the privileges its roles hold on River's tables. The roles themselves
-- stay: they are shared by every database of the server.

DROP SCHEMA ordertimeout CASCADE;

DO $river$
DECLARE
    v_name text;
BEGIN
    FOR v_name IN
        SELECT c.relname
        FROM pg_catalog.pg_class AS c
        JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public'
          AND c.relname LIKE 'river\_%'
          AND c.relkind IN ('r', 'S')
        ORDER BY c.relname
    LOOP
        EXECUTE format('REVOKE ALL ON public.%I FROM ordertimeout_sidecar', v_name);
    END LOOP;
END
$river$;
