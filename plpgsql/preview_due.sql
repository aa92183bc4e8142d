CREATE FUNCTION ordertimeout.preview_due(max integer DEFAULT 100)
RETURNS TABLE (
    order_id         text,
    cancel_at        timestamptz,
    overdue          interval,
    deadline_version integer,
    found_by         text,
    action           text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_precheck text;
BEGIN
    PERFORM ordertimeout._check_max(preview_due.max);
    SELECT s.precheck INTO v_precheck FROM ordertimeout.settings AS s;

    RETURN QUERY
    SELECT d.order_id, d.cancel_at, v_now - d.cancel_at, d.deadline_version, d.found_by,
           CASE WHEN CASE coalesce(d.precheck, v_precheck)
                         WHEN 'always' THEN true
                         WHEN 'never' THEN false
                         ELSE d.payment_attempted
                     END
                THEN 'check' ELSE 'cancel' END
    FROM (
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'timer'::text AS found_by, o.precheck, o.payment_attempted
           FROM public.river_job AS r
           JOIN ordertimeout.orders AS o
             ON ordertimeout._is_timer_args(r.args)
            AND o.order_id = r.args ->> 'order_id'
            AND o.deadline_version = (CASE WHEN ordertimeout._is_timer_args(r.args)
                                           THEN (r.args ->> 'version')::integer END)
            AND o.status = 'PENDING'
            AND o.check_job_id IS NULL
          WHERE r.state = 'available'
            AND r.queue = 'ordertimeout_expire'
            AND r.priority = 1
            AND r.scheduled_at <= v_now
          ORDER BY r.scheduled_at
          LIMIT preview_due.max)
        UNION ALL
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'sweep'::text, o.precheck, o.payment_attempted
           FROM ordertimeout.orders AS o
          WHERE o.status = 'PENDING'
            AND o.check_job_id IS NULL
            AND o.cancel_at <= v_now
            AND NOT EXISTS (SELECT 1
                              FROM public.river_job AS r
                             WHERE r.id = o.timer_job_id
                               AND r.finalized_at IS NULL)
          ORDER BY o.cancel_at
          LIMIT preview_due.max)
    ) AS d
    ORDER BY d.cancel_at, d.order_id
    LIMIT preview_due.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.preview_due(integer) IS
    'dry run of sweep_due: the orders it would cancel (action cancel) or hand to a gateway check (action check) now, found by their timer row or by the fallback sweep; changes nothing';
