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
    v_paused   boolean;
BEGIN
    PERFORM ordertimeout._check_max(preview_due.max);
    SELECT s.precheck, s.paused INTO v_precheck, v_paused FROM ordertimeout.settings AS s;

    RETURN QUERY
    SELECT d.order_id, d.cancel_at, v_now - d.cancel_at, d.deadline_version, d.found_by,
           CASE WHEN v_paused THEN 'paused'
                WHEN ordertimeout._wants_check(d.precheck, v_precheck, d.payment_attempted)
                THEN 'check' ELSE 'cancel' END
    FROM (
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'timer'::text AS found_by, o.precheck, o.payment_attempted
           FROM ordertimeout._timers AS t
           JOIN ordertimeout.orders AS o
             ON ordertimeout._is_timer_args(t.args)
            AND o.order_id = t.args ->> 'order_id'
            AND o.deadline_version = (CASE WHEN ordertimeout._is_timer_args(t.args)
                                           THEN (t.args ->> 'version')::integer END)
            AND o.status = 'PENDING'
            AND o.check_job_id IS NULL
            AND o.cancel_at <= v_now
          WHERE t.due_at <= v_now
          ORDER BY t.due_at
          LIMIT preview_due.max)
        UNION ALL
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'sweep'::text, o.precheck, o.payment_attempted
           FROM ordertimeout.orders AS o
          WHERE o.status = 'PENDING'
            AND o.check_job_id IS NULL
            AND o.cancel_at <= v_now
            AND NOT EXISTS (SELECT 1 FROM ordertimeout._unfinished_jobs AS j WHERE j.job_id = o.timer_job_id)
          ORDER BY o.cancel_at
          LIMIT preview_due.max)
    ) AS d
    ORDER BY d.cancel_at, d.order_id
    LIMIT preview_due.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.preview_due(integer) IS
    'dry run of sweep_due: the orders it would cancel (action cancel) or hand to a gateway check (action check) now, or that it leaves while timeout cancels are paused (action paused), found by their timer row or by the fallback sweep; changes nothing';
