-- River's tables. Every statement of ordertimeout that reads or writes
-- public.river_job is in this file, so a River upgrade touches one file.
-- Timer rows (queue ordertimeout_expire, which no River client serves) are
-- claimed by sweep_due; rows in queue ordertimeout are worked by the
-- sidecar's River client.

-- Inserts a River job row and returns its id. Rows in queue
-- ordertimeout_expire are timers claimed by sweep_due; rows in queue
-- ordertimeout are worked by the sidecar's River client.
CREATE FUNCTION ordertimeout._insert_job(kind text, args jsonb, queue text, scheduled_at timestamptz)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO public.river_job (kind, args, queue, state, scheduled_at)
    VALUES (kind, args, queue, 'available', scheduled_at)
    RETURNING id INTO v_id;
    RETURN v_id;
END
$$;

-- Deletes a timer row that can no longer act, unless a sweep holds it right
-- now (SKIP LOCKED: never wait for a sweep while holding an order row; the
-- sweep deletes the row itself, and the version check makes it harmless).
CREATE FUNCTION ordertimeout._drop_timer(job_id bigint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _drop_timer.job_id IS NULL THEN
        RETURN;
    END IF;
    DELETE FROM public.river_job AS r
    WHERE r.id = (SELECT l.id
                    FROM public.river_job AS l
                   WHERE l.id = _drop_timer.job_id
                     AND l.queue = 'ordertimeout_expire'
                     FOR UPDATE SKIP LOCKED);
END
$$;

-- Wakes the sleeping sweepers when a deadline comes before the moment they
-- planned to wake up (ordertimeout.plan_sleep). The payload is empty: the
-- deadline is in the table.
CREATE FUNCTION ordertimeout._wake_if_sooner(cancel_at timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cancel_at < (SELECT s.wake_at FROM ordertimeout.sweep_state AS s) THEN
        PERFORM pg_notify('ordertimeout_wake', '');
    END IF;
END
$$;

-- Queues a webhook delivery per event (when webhooks are on).
CREATE FUNCTION ordertimeout._enqueue_webhooks(event_ids bigint[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO public.river_job (kind, args, queue, state, scheduled_at)
    SELECT 'ordertimeout_webhook', jsonb_build_object('event_id', e.event_id, 'order_id', e.order_id),
           'ordertimeout', 'available', now()
    FROM ordertimeout.events AS e
    WHERE e.event_id = ANY (event_ids)
      AND (SELECT s.webhooks FROM ordertimeout.settings AS s);
END
$$;

-- Whether args, the args of a timer row, are what the timers of
-- create_order and friends carry: {"order_id": <text>, "version": <integer>}.
CREATE FUNCTION ordertimeout._is_timer_args(args jsonb)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN jsonb_typeof(args -> 'order_id') = 'string'
       AND jsonb_typeof(args -> 'version') = 'number'
       AND (args ->> 'version') ~ '^[0-9]{1,9}$';
END
$$;

-- Sets malformed timer rows aside: discarded, with the reason recorded on
-- the row as River records errors (sweep_stats.malformed_timers counts
-- them). The order of such a row, if any, has lost its timer and is caught
-- by the fallback of sweep_due.
CREATE FUNCTION ordertimeout._discard_malformed_timers(job_ids bigint[], at timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE public.river_job AS r
    SET state = 'discarded',
        finalized_at = _discard_malformed_timers.at,
        errors = array_append(r.errors, jsonb_build_object(
            'at', _discard_malformed_timers.at,
            'attempt', greatest(r.attempt, 0),
            'error', format('Malformed ordertimeout timer set aside by ordertimeout.sweep_due: args must be {"order_id": text, "version": integer}, got %s',
                            left(r.args::text, 200)),
            'trace', ''))
    WHERE r.id = ANY (_discard_malformed_timers.job_ids);
END
$$;
