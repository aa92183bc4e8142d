-- The single-order API functions (create_order, begin/confirm/fail_payment,
-- cancel_order, extend_deadline, cancel_checked, resolve_conflict) run with
-- plan_cache_mode = force_generic_plan, nested helpers included. Their
-- statements touch one order and a few SKUs by primary key, so the generic
-- plan is the right one; left to choose, PostgreSQL keeps re-planning the
-- statements over unnest(...) or = ANY (...) on every call (a custom plan
-- estimated cheaper than the generic one), which cost about a third of
-- create_order's time.
CREATE FUNCTION ordertimeout.create_order(
    order_id text,
    items    jsonb,
    timeout  interval DEFAULT NULL,
    options  jsonb DEFAULT '{}')
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_settings ordertimeout.settings;
    v_norm     record;
    v_items    jsonb;
    v_options  jsonb;
    v_request  jsonb;
    v_existing jsonb;
    v_expire   timestamptz;
    v_cancel   timestamptz;
    v_job_id   bigint;
    v_skus     text[];
    v_qtys     integer[];
    v_missing  text;
    v_coupon   text;
    v_account  text;
    v_points   bigint;
    v_event_id bigint;
    v_woke     boolean;
    v_state    ordertimeout.order_state;
BEGIN
    -- Each check helper runs only when its argument fails the quick test
    -- (see plpgsql/checks.sql), and raises the error naming the field.
    IF NOT ordertimeout._is_identifier(create_order.order_id, 64) THEN
        PERFORM ordertimeout._check_order_id(create_order.order_id);
    END IF;
    v_norm := ordertimeout._normalize_items(create_order.items);
    v_items := v_norm.normalized;
    v_skus := v_norm.skus;
    v_qtys := v_norm.qtys;
    IF create_order.options IS NULL OR create_order.options = '{}' THEN
        v_options := '{}';
    ELSE
        v_options := ordertimeout._normalize_options(create_order.options);
    END IF;
    IF NOT ordertimeout._is_duration(create_order.timeout, interval '30 days') THEN
        PERFORM ordertimeout._check_interval('timeout', create_order.timeout, interval '30 days', 'OT113');
    END IF;

    SELECT * INTO v_settings FROM ordertimeout.settings;
    v_expire := v_now + coalesce(create_order.timeout, v_settings.default_timeout);
    v_cancel := v_expire + v_settings.grace;
    v_coupon := v_options ->> 'coupon';
    v_account := v_options ->> 'points_account';
    v_points := (v_options ->> 'points')::bigint;
    IF v_options ? 'method' THEN
        PERFORM ordertimeout._payment_method('options.method', v_options ->> 'method');
    END IF;
    v_request := jsonb_build_object(
        'items', v_items,
        'timeout', extract(epoch FROM create_order.timeout),
        'options', v_options);

    -- The order row and the id of its timer row. Same id again: the existing
    -- order if the content is the same, an error if not. Not under the id of
    -- an order that purge_orders deleted after it spent a coupon: that hold is
    -- kept, under the id (coupon_holds_pkey), so that the coupon is never used
    -- again, and a new order there would be read as holding it.
    INSERT INTO ordertimeout.orders AS o (
        order_id, status, created_at, expire_at, cancel_at, timer_job_id, precheck,
        amount, currency, coupon_id, points_account, points, request, payment_method)
    SELECT
        create_order.order_id, 'PENDING', v_now, v_expire, v_cancel, ordertimeout._new_job_id(),
        v_options ->> 'precheck', (v_options ->> 'amount')::numeric, v_options ->> 'currency',
        v_coupon, v_account, v_points, v_request, v_options ->> 'method'
    WHERE NOT EXISTS (SELECT 1 FROM ordertimeout.coupon_holds AS h WHERE h.order_id = create_order.order_id)
    ON CONFLICT ON CONSTRAINT orders_pkey DO NOTHING
    RETURNING o.timer_job_id INTO v_job_id;

    IF v_job_id IS NULL THEN
        SELECT o.request INTO v_existing FROM ordertimeout.orders AS o WHERE o.order_id = create_order.order_id;
        IF NOT FOUND THEN
            SELECT h.coupon_id INTO v_coupon FROM ordertimeout.coupon_holds AS h WHERE h.order_id = create_order.order_id;
            IF FOUND THEN
                RAISE EXCEPTION 'order_id "%" belonged to an order that purge_orders deleted after it spent coupon "%": the hold is kept under that id, use another one',
                    create_order.order_id, v_coupon
                    USING ERRCODE = 'OT116';
            END IF;
            -- The order that was there went between the INSERT and this
            -- look (purged, without a spent coupon): the id is free, but
            -- this call wrote nothing. A serialization failure, which
            -- clients retry.
            RAISE EXCEPTION 'order_id "%" was purged while this call looked at it: call again', create_order.order_id
                USING ERRCODE = 'serialization_failure';
        END IF;
        IF v_existing = v_request THEN
            RETURN ordertimeout._order_state(create_order.order_id, false);
        END IF;
        RAISE EXCEPTION 'order_id "%" already exists with other items, timeout or options', create_order.order_id
            USING ERRCODE = 'OT115';
    END IF;

    INSERT INTO ordertimeout.order_items (order_id, sku, qty)
    SELECT create_order.order_id, r.sku, r.qty
    FROM unnest(v_skus, v_qtys) AS r(sku, qty);

    -- The timeout: a River job row in the same transaction, in a queue no River
    -- client serves; sweep_due claims it once cancel_at has come.
    PERFORM ordertimeout._schedule_timer(v_job_id, create_order.order_id, 1, v_cancel);

    IF v_settings.webhooks AND v_settings.remind_before IS NOT NULL THEN
        PERFORM ordertimeout._schedule_reminder(create_order.order_id, 1, v_expire, v_settings.remind_before, v_now);
    END IF;

    v_event_id := ordertimeout._log_event(create_order.order_id, NULL, 'PENDING', 'requested', v_now);
    v_woke := ordertimeout._wake_if_sooner(v_cancel);

    -- Reserve stock, all or nothing, last: a popular SKU's row stays locked
    -- only from here to the commit, not while the rest of the order is
    -- written. One conditional UPDATE per SKU, in sku order (the lock order
    -- of every function that locks stock rows); one that finds no row (an
    -- unknown SKU, or not enough stock) raises, which rolls back everything
    -- above.
    FOR i IN 1 .. cardinality(v_skus) LOOP
        UPDATE ordertimeout.stock AS s
        SET available = s.available - v_qtys[i],
            reserved = s.reserved + v_qtys[i]
        WHERE s.sku = v_skus[i]
          AND s.available >= v_qtys[i];
        IF NOT FOUND THEN
            SELECT r.sku INTO v_missing
            FROM unnest(v_skus) AS r(sku)
            WHERE NOT EXISTS (SELECT 1 FROM ordertimeout.stock AS s WHERE s.sku = r.sku)
            ORDER BY 1
            LIMIT 1;
            IF v_missing IS NOT NULL THEN
                RAISE EXCEPTION 'items: sku "%" is unknown', v_missing
                    USING ERRCODE = 'OT108';
            END IF;
            RAISE EXCEPTION 'items: not enough stock of sku "%" (% available, % requested)', v_skus[i],
                (SELECT s.available FROM ordertimeout.stock AS s WHERE s.sku = v_skus[i]), v_qtys[i]
                USING ERRCODE = 'OT109';
        END IF;
    END LOOP;

    -- Then the coupon and the points: stock, coupon, points is the lock
    -- order of every function that takes or gives back more than one.
    IF v_coupon IS NOT NULL THEN
        INSERT INTO ordertimeout.coupon_holds (order_id, coupon_id, held_at)
        VALUES (create_order.order_id, v_coupon, v_now)
        ON CONFLICT (coupon_id) WHERE released_at IS NULL DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'options.coupon "%" is already held by another order', v_coupon
                USING ERRCODE = 'OT110';
        END IF;
    END IF;

    IF v_account IS NOT NULL THEN
        UPDATE ordertimeout.points_accounts AS a
        SET held = a.held + v_points
        WHERE a.account_id = v_account
          AND a.balance - a.held >= v_points;
        IF NOT FOUND THEN
            IF NOT EXISTS (SELECT 1 FROM ordertimeout.points_accounts AS a WHERE a.account_id = v_account) THEN
                RAISE EXCEPTION 'options.points_account "%" is unknown', v_account
                    USING ERRCODE = 'OT111';
            END IF;
            RAISE EXCEPTION 'options.points % exceed the free points of account "%"', v_points, v_account
                USING ERRCODE = 'OT112';
        END IF;
        INSERT INTO ordertimeout.points_holds (order_id, account_id, points, held_at)
        VALUES (create_order.order_id, v_account, v_points, v_now);
    END IF;

    -- The new order as _order_state would read it back, from the values in
    -- hand: the row was written above with no other defaults than these.
    v_state.order_id := create_order.order_id;
    v_state.status := 'PENDING';
    v_state.created := true;
    v_state.created_at := v_now;
    v_state.expire_at := v_expire;
    v_state.cancel_at := v_cancel;
    v_state.deadline_version := 1;
    v_state.amount := (v_options ->> 'amount')::numeric;
    v_state.currency := v_options ->> 'currency';
    v_state.items := v_items;
    v_state.coupon_id := v_coupon;
    v_state.points_account := v_account;
    v_state.points := v_points;
    v_state.payment_attempted := false;
    v_state.open_conflicts := 0;
    v_state.payment_method := v_options ->> 'method';
    RETURN v_state;
END
$$;

COMMENT ON FUNCTION ordertimeout.create_order(text, jsonb, interval, jsonb) IS
    'places a PENDING order: reserves every item''s stock all or nothing, holds the coupon and points of options, schedules its timeout in the same transaction; idempotent on order_id';
