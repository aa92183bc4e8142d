-- Schema and roles.
--
-- Everything of ordertimeout lives in schema ordertimeout. River's tables live
-- where River puts them by default (public), created by River's own migrations.
--
-- Roles are cluster-wide, so they are created only when missing:
--   ordertimeout_app      may call the order lifecycle API, nothing else;
--   ordertimeout_sidecar  the API, the sweep, conflict resolution and River's tables;
--   ordertimeout_admin    everything in the API (stock, points, settings) and
--                         read access to every ordertimeout table.
-- None of them may log in; grant them to login roles.

CREATE SCHEMA ordertimeout;

COMMENT ON SCHEMA ordertimeout IS
    'ordertimeout: cancels unpaid orders on time, exactly once, never a paid one';

DO $roles$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['ordertimeout_app', 'ordertimeout_sidecar', 'ordertimeout_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
        END IF;
    END LOOP;
END
$roles$;
