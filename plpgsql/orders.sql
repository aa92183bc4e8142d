-- Reading and moving one order, and cancelling a batch of them: the helpers
-- every transition shares.

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
            AND c.resolution IS NULL),
        o.payment_method,
        o.gateway_expire_at
    INTO v_state
    FROM ordertimeout.orders AS o
    WHERE o.order_id = _order_state.order_id;
    RETURN v_state;
END
$$;

-- Cancels the given orders that are still PENDING (and, where a version is
-- given, still at that deadline version), releases what they reserved, logs
-- the events and queues a gateway close for those that had a payment attempt.
-- Set-based: one UPDATE decides which orders this call cancels. With
-- respect_precheck, orders whose policy wants a gateway check first are left
-- alone. Returns the orders it cancelled.
CREATE FUNCTION ordertimeout._cancel_orders(
    order_ids        text[],
    versions         integer[],
    causes           text[],
    reason           text,
    respect_precheck boolean)
RETURNS TABLE (cancelled_order_id text, cancelled_cause text)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_precheck  text;
    v_webhooks  boolean;
    v_paused_at timestamptz;
    v_resumed   timestamptz;
    v_actor     text := ordertimeout._actor();
    v_ids       text[];
    v_causes    text[];
    v_at        timestamptz[];
    v_cancel_at timestamptz[];
    v_attempted boolean[];
    v_methods   text[];
    v_event_ids bigint[];
BEGIN
    SELECT s.precheck, s.webhooks, s.paused_at, s.resumed_at
    INTO v_precheck, v_webhooks, v_paused_at, v_resumed
    FROM ordertimeout.settings AS s;

    WITH cancelled AS (
        UPDATE ordertimeout.orders AS o
        SET status = 'CANCELLED',
            cancelled_at = clock_timestamp(),
            cancel_cause = t.cause,
            cancel_reason = _cancel_orders.reason,
            deadline_version = o.deadline_version + 1,
            timer_job_id = NULL
        FROM unnest(_cancel_orders.order_ids, _cancel_orders.versions, _cancel_orders.causes)
             AS t(order_id, version, cause)
        WHERE o.order_id = t.order_id
          AND o.status = 'PENDING'
          AND (t.version IS NULL OR o.deadline_version = t.version)
          AND (NOT _cancel_orders.respect_precheck
               OR NOT CASE coalesce(o.precheck, v_precheck)
                          WHEN 'always' THEN true
                          WHEN 'never' THEN false
                          ELSE o.payment_attempted
                      END)
        RETURNING o.order_id, t.cause, o.cancelled_at, o.cancel_at, o.payment_attempted, o.payment_method
    )
    SELECT array_agg(c.order_id), array_agg(c.cause), array_agg(c.cancelled_at),
           array_agg(c.cancel_at), array_agg(c.payment_attempted), array_agg(c.payment_method)
    INTO v_ids, v_causes, v_at, v_cancel_at, v_attempted, v_methods
    FROM cancelled AS c;

    IF v_ids IS NULL THEN
        RETURN;
    END IF;

    WITH logged AS (
        INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, lateness, at, detail)
        SELECT e.order_id, 'PENDING', 'CANCELLED', e.cause, v_actor,
               CASE WHEN e.cause IN ('timeout', 'sweep') THEN e.at - e.cancel_at END,
               e.at,
               -- A timeout due while cancels were paused says so: its
               -- lateness includes the pause.
               nullif(CASE WHEN _cancel_orders.reason IS NOT NULL
                           THEN jsonb_build_object('reason', _cancel_orders.reason) ELSE '{}' END
                      || CASE WHEN e.cause IN ('timeout', 'sweep') AND e.cancel_at < v_resumed AND e.cancel_at >= v_paused_at
                              THEN jsonb_build_object('waited_for_pause', true, 'paused_at', v_paused_at,
                                                      'resumed_at', v_resumed)
                              ELSE '{}' END,
                      '{}')
        FROM unnest(v_ids, v_causes, v_at, v_cancel_at) AS e(order_id, cause, at, cancel_at)
        RETURNING event_id
    )
    SELECT array_agg(l.event_id) INTO v_event_ids FROM logged AS l;

    IF v_webhooks THEN
        PERFORM ordertimeout._enqueue_webhooks(v_event_ids);
    END IF;

    -- A buyer who started a payment must not be able to finish it now: close
    -- the payment at the gateway (unless its method has nothing to close: a
    -- bank transfer).
    INSERT INTO public.river_job (kind, args, queue, state, scheduled_at)
    SELECT 'ordertimeout_gateway_close', jsonb_build_object('order_id', g.order_id), 'ordertimeout', 'available', now()
    FROM unnest(v_ids, v_attempted, v_methods) AS g(order_id, attempted, method)
    LEFT JOIN ordertimeout.payment_methods AS m ON m.method = g.method
    WHERE g.attempted
      AND coalesce(m.gateway_close, true);

    -- Give back stock, coupons and points last: the stock rows of the batch,
    -- which every create_order of the same SKUs needs, stay locked only from
    -- here to the commit.
    PERFORM ordertimeout._release(v_ids, v_causes, clock_timestamp());

    RETURN QUERY SELECT r.order_id, r.cause FROM unnest(v_ids, v_causes) AS r(order_id, cause);
END
$$;
