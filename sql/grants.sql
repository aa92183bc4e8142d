-- Privileges. Every function is SECURITY DEFINER or private, so no role needs
-- any table privilege to use the API. Nothing is executable by PUBLIC.

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ordertimeout FROM PUBLIC;
REVOKE ALL ON ALL PROCEDURES IN SCHEMA ordertimeout FROM PUBLIC;
REVOKE ALL ON SCHEMA ordertimeout FROM PUBLIC;

GRANT USAGE ON SCHEMA ordertimeout TO ordertimeout_app, ordertimeout_sidecar, ordertimeout_admin;

-- The application: the order lifecycle and reading one order.
GRANT EXECUTE ON FUNCTION
    ordertimeout.create_order(text, jsonb, interval, jsonb),
    ordertimeout.begin_payment(text, text, interval, text),
    ordertimeout.confirm_payment(text, text, numeric, text, timestamptz),
    ordertimeout.fail_payment(text, text),
    ordertimeout.cancel_order(text, text),
    ordertimeout.extend_deadline(text, interval),
    ordertimeout.order_info(text),
    ordertimeout.order_events(text),
    ordertimeout.order_payments(text)
TO ordertimeout_app, ordertimeout_sidecar, ordertimeout_admin;

-- The sidecar: the sweep, gateway checks, conflicts, and the stats views.
GRANT EXECUTE ON FUNCTION
    ordertimeout.sweep_due(integer),
    ordertimeout.cancel_due(integer),
    ordertimeout.preview_due(integer),
    ordertimeout.cancel_checked(text, integer),
    ordertimeout.next_due(),
    ordertimeout.plan_sleep(interval),
    ordertimeout.plan_next_sweep(interval, timestamptz, interval),
    ordertimeout.rescue_stuck_jobs(interval, integer),
    ordertimeout.resolve_conflict(bigint, text, text),
    ordertimeout.hand_over_conflict(bigint, text),
    ordertimeout.finish_refund(bigint, text),
    ordertimeout.reconcile_payments(jsonb, timestamptz, timestamptz, boolean, text),
    ordertimeout.reconcile_watermark(text),
    ordertimeout.open_conflicts(integer),
    ordertimeout.conflicts_to_resolve(integer),
    ordertimeout.conflict_info(bigint),
    ordertimeout.close_cancelled(interval, integer)
TO ordertimeout_sidecar, ordertimeout_admin;

-- Retention, and the sweeper for pg_cron without the sidecar (a procedure:
-- it runs with its caller's rights and calls sweep_due and plan_next_sweep).
GRANT EXECUTE ON FUNCTION
    ordertimeout.purge_orders(interval, integer, interval)
TO ordertimeout_sidecar, ordertimeout_admin;
GRANT EXECUTE ON PROCEDURE
    ordertimeout.run_sweeper(integer, interval, interval)
TO ordertimeout_sidecar, ordertimeout_admin;

GRANT SELECT ON
    ordertimeout.order_counts,
    ordertimeout.sweep_stats,
    ordertimeout.cancel_lag,
    ordertimeout.settings,
    ordertimeout.payment_methods
TO ordertimeout_sidecar, ordertimeout_admin;

-- The administrator: stock, points, settings, and reading every table.
GRANT EXECUTE ON FUNCTION
    ordertimeout.put_stock(text, bigint),
    ordertimeout.put_points(text, bigint),
    ordertimeout.put_payment_method(text, interval, boolean, text),
    ordertimeout.configure(interval, interval, interval, text, text, boolean, interval, boolean)
TO ordertimeout_admin;

GRANT SELECT ON ALL TABLES IN SCHEMA ordertimeout TO ordertimeout_admin;

-- River's client in the sidecar reads and writes River's tables.
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
          AND c.relkind = 'r'
        ORDER BY c.relname
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO ordertimeout_sidecar', v_name);
    END LOOP;
    FOR v_name IN
        SELECT c.relname
        FROM pg_catalog.pg_class AS c
        JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public'
          AND c.relname LIKE 'river\_%'
          AND c.relkind = 'S'
        ORDER BY c.relname
    LOOP
        EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE public.%I TO ordertimeout_sidecar', v_name);
    END LOOP;
END
$river$;
