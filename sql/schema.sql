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

-- Two databases of one server migrated at once both find a role missing; the
-- slower CREATE ROLE then fails, which is fine: the role exists.
DO $roles$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['ordertimeout_app', 'ordertimeout_sidecar', 'ordertimeout_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION
                WHEN duplicate_object OR unique_violation THEN
                    NULL;
            END;
        END IF;
    END LOOP;
END
$roles$;
