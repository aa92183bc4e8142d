-- Private helpers. EXECUTE on them is revoked from PUBLIC (grants.sql); the
-- API functions run them as their owner.

-- Helpers are PL/pgSQL, not SQL: a SQL function with a SET clause cannot be
-- inlined and is planned again on every call, PL/pgSQL keeps its plans.
CREATE FUNCTION ordertimeout._actor()
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce(nullif(current_setting('ordertimeout.actor', true), ''), session_user::text);
END
$$;

COMMENT ON FUNCTION ordertimeout._actor() IS
    'who acts: the ordertimeout.actor setting of the session if set (SET ordertimeout.actor = ''user:42''), else the login role';

CREATE FUNCTION ordertimeout._check_order_id(order_id text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF order_id IS NULL THEN
        RAISE EXCEPTION 'order_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF char_length(order_id) NOT BETWEEN 1 AND 64 OR order_id ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'order_id must be 1 to 64 characters without control characters (got % characters)',
            char_length(order_id)
            USING ERRCODE = 'OT101';
    END IF;
END
$$;

CREATE FUNCTION ordertimeout._check_payment_id(payment_id text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF payment_id IS NULL THEN
        RAISE EXCEPTION 'payment_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF char_length(payment_id) NOT BETWEEN 1 AND 128 OR payment_id ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'payment_id must be 1 to 128 characters without control characters (got % characters)',
            char_length(payment_id)
            USING ERRCODE = 'OT121';
    END IF;
END
$$;

-- Raises OT100/OT140 unless max, a batch size, is between 1 and 100,000.
CREATE FUNCTION ordertimeout._check_max(max integer)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF max IS NULL THEN
        RAISE EXCEPTION 'max must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF max NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'max must be between 1 and 100000, got %', max
            USING ERRCODE = 'OT140';
    END IF;
END
$$;

-- Validates create_order's items and returns them sorted by sku as
-- [{"sku": ..., "qty": ...}], the form stored and compared for idempotency.
CREATE FUNCTION ordertimeout._normalize_items(items jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     jsonb;
    v_position integer := -1;
    v_key      text;
    v_sku      text;
    v_qty      numeric;
    v_count    integer;
    v_dup      text;
    v_result   jsonb;
BEGIN
    IF items IS NULL THEN
        RAISE EXCEPTION 'items must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF jsonb_typeof(items) <> 'array' THEN
        RAISE EXCEPTION 'items must be a JSON array of {"sku": ..., "qty": ...} objects, got a JSON %',
            jsonb_typeof(items)
            USING ERRCODE = 'OT102';
    END IF;
    v_count := jsonb_array_length(items);
    IF v_count = 0 OR v_count > 100 THEN
        RAISE EXCEPTION 'items must have 1 to 100 entries, got %', v_count
            USING ERRCODE = 'OT103';
    END IF;

    FOR v_item IN SELECT e.value FROM jsonb_array_elements(items) AS e LOOP
        v_position := v_position + 1;
        IF jsonb_typeof(v_item) <> 'object' THEN
            RAISE EXCEPTION 'items[%] must be an object {"sku": ..., "qty": ...}, got a JSON %',
                v_position, jsonb_typeof(v_item)
                USING ERRCODE = 'OT104';
        END IF;
        SELECT k INTO v_key FROM jsonb_object_keys(v_item) AS k WHERE k NOT IN ('sku', 'qty') LIMIT 1;
        IF v_key IS NOT NULL THEN
            RAISE EXCEPTION 'items[%] has unknown key "%" (allowed: sku, qty)', v_position, v_key
                USING ERRCODE = 'OT104';
        END IF;
        IF jsonb_typeof(v_item -> 'sku') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'items[%].sku must be a string', v_position
                USING ERRCODE = 'OT104';
        END IF;
        v_sku := v_item ->> 'sku';
        IF char_length(v_sku) NOT BETWEEN 1 AND 64 OR v_sku ~ '[[:cntrl:]]' THEN
            RAISE EXCEPTION 'items[%].sku must be 1 to 64 characters without control characters', v_position
                USING ERRCODE = 'OT104';
        END IF;
        IF NOT v_item ? 'qty' THEN
            RAISE EXCEPTION 'items[%].qty is missing', v_position
                USING ERRCODE = 'OT105';
        END IF;
        IF jsonb_typeof(v_item -> 'qty') <> 'number'
           OR (v_item ->> 'qty')::numeric <> trunc((v_item ->> 'qty')::numeric) THEN
            RAISE EXCEPTION 'items[%].qty must be an integer, got %', v_position, v_item -> 'qty'
                USING ERRCODE = 'OT105';
        END IF;
        v_qty := (v_item ->> 'qty')::numeric;
        IF v_qty < 1 OR v_qty > 1000000 THEN
            RAISE EXCEPTION 'items[%].qty must be between 1 and 1000000, got %', v_position, v_qty
                USING ERRCODE = 'OT106';
        END IF;
    END LOOP;

    SELECT e.value ->> 'sku' INTO v_dup
    FROM jsonb_array_elements(items) AS e
    GROUP BY 1
    HAVING count(*) > 1
    ORDER BY 1
    LIMIT 1;
    IF v_dup IS NOT NULL THEN
        RAISE EXCEPTION 'items lists sku "%" more than once', v_dup
            USING ERRCODE = 'OT107';
    END IF;

    SELECT jsonb_agg(
               jsonb_build_object('sku', e.value ->> 'sku', 'qty', (e.value ->> 'qty')::numeric::integer)
               ORDER BY e.value ->> 'sku')
    INTO v_result
    FROM jsonb_array_elements(items) AS e;
    RETURN v_result;
END
$$;

-- Validates create_order's options; returns them as given (NULL counts as {}).
CREATE FUNCTION ordertimeout._normalize_options(options jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key text;
BEGIN
    IF options IS NULL THEN
        RETURN '{}'::jsonb;
    END IF;
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'options must be a JSON object, got a JSON %', jsonb_typeof(options)
            USING ERRCODE = 'OT114';
    END IF;
    SELECT k INTO v_key
    FROM jsonb_object_keys(options) AS k
    WHERE k NOT IN ('coupon', 'points_account', 'points', 'amount', 'currency', 'precheck')
    ORDER BY 1
    LIMIT 1;
    IF v_key IS NOT NULL THEN
        RAISE EXCEPTION 'options has unknown key "%" (allowed: coupon, points_account, points, amount, currency, precheck)', v_key
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'coupon' AND (jsonb_typeof(options -> 'coupon') <> 'string'
                               OR char_length(options ->> 'coupon') NOT BETWEEN 1 AND 64
                               OR (options ->> 'coupon') ~ '[[:cntrl:]]') THEN
        RAISE EXCEPTION 'options.coupon must be a string of 1 to 64 characters without control characters'
            USING ERRCODE = 'OT114';
    END IF;
    IF (options ? 'points_account') <> (options ? 'points') THEN
        RAISE EXCEPTION 'options.points and options.points_account must be given together'
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'points_account' AND (jsonb_typeof(options -> 'points_account') <> 'string'
                                       OR char_length(options ->> 'points_account') NOT BETWEEN 1 AND 64
                                       OR (options ->> 'points_account') ~ '[[:cntrl:]]') THEN
        RAISE EXCEPTION 'options.points_account must be a string of 1 to 64 characters without control characters'
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'points' AND (jsonb_typeof(options -> 'points') <> 'number'
                               OR (options ->> 'points')::numeric <> trunc((options ->> 'points')::numeric)
                               OR (options ->> 'points')::numeric NOT BETWEEN 1 AND 1000000000000) THEN
        RAISE EXCEPTION 'options.points must be an integer between 1 and 1000000000000, got %', options -> 'points'
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'amount' AND (jsonb_typeof(options -> 'amount') <> 'number'
                               OR (options ->> 'amount')::numeric < 0) THEN
        RAISE EXCEPTION 'options.amount must be a number >= 0, got %', options -> 'amount'
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'currency' AND (jsonb_typeof(options -> 'currency') <> 'string'
                                 OR (options ->> 'currency') !~ '^[A-Z]{3}$') THEN
        RAISE EXCEPTION 'options.currency must be a three-letter ISO 4217 code such as "EUR", got %', options -> 'currency'
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'precheck' AND (jsonb_typeof(options -> 'precheck') <> 'string'
                                 OR (options ->> 'precheck') NOT IN ('attempted', 'always', 'never')) THEN
        RAISE EXCEPTION 'options.precheck must be "attempted", "always" or "never", got %', options -> 'precheck'
            USING ERRCODE = 'OT114';
    END IF;
    RETURN options;
END
$$;

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

-- Appends one event and returns its id.
CREATE FUNCTION ordertimeout._log_event(
    order_id    text,
    from_status text,
    to_status   text,
    cause       text,
    at          timestamptz,
    detail      jsonb DEFAULT NULL,
    webhook     boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_event_id bigint;
BEGIN
    INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, at, detail)
    VALUES (order_id, from_status, to_status, cause, ordertimeout._actor(), at, detail)
    RETURNING event_id INTO v_event_id;
    IF webhook THEN
        PERFORM ordertimeout._enqueue_webhooks(ARRAY[v_event_id]);
    END IF;
    RETURN v_event_id;
END
$$;

CREATE FUNCTION ordertimeout._order_state(order_id text, created boolean)
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_state ordertimeout.order_state;
BEGIN
    SELECT
        o.order_id,
        o.status,
        _order_state.created,
        o.created_at,
        o.expire_at,
        o.cancel_at,
        o.paying_until,
        o.paid_at,
        o.cancelled_at,
        o.closed_at,
        o.cancel_cause,
        o.deadline_version,
        o.amount,
        o.currency,
        (SELECT jsonb_agg(jsonb_build_object('sku', i.sku, 'qty', i.qty) ORDER BY i.sku)
           FROM ordertimeout.order_items AS i
          WHERE i.order_id = o.order_id),
        o.coupon_id,
        o.points_account,
        o.points,
        o.payment_attempted,
        (SELECT count(*)::integer
           FROM ordertimeout.conflicts AS c
          WHERE c.order_id = o.order_id
            AND c.resolution IS NULL)
    INTO v_state
    FROM ordertimeout.orders AS o
    WHERE o.order_id = _order_state.order_id;
    RETURN v_state;
END
$$;

-- Raises OT120 when the order does not exist.
CREATE FUNCTION ordertimeout._require_order(order_id text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ordertimeout._check_order_id(order_id);
    IF NOT EXISTS (SELECT 1 FROM ordertimeout.orders AS o WHERE o.order_id = _require_order.order_id) THEN
        RAISE EXCEPTION 'order_id "%" is unknown', order_id
            USING ERRCODE = 'OT120';
    END IF;
END
$$;
