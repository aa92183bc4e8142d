-- Reconciliation against the gateway's records. The caller (any language;
-- `ordertimeout reconcile` parses CSV files and the sidecar asks the gateway)
-- passes the gateway's transactions of a period as JSON:
--
--   [{"payment_id": "P1", "order_id": "A1", "amount": "12.50", "currency": "EUR",
--     "status": "paid" | "refunded", "at": "2026-12-01T10:00:00Z", "line": 2}, ...]
--
-- ("line", optional, is the caller's line number, named in errors and in the
-- report). The call is applied whole or not at all: every row is checked
-- first, and a bad row raises OT171 naming its line and field, with nothing
-- written. Running the same transactions again changes nothing.

CREATE FUNCTION ordertimeout.reconcile_payments(
    transactions   jsonb,
    period_start   timestamptz,
    period_end     timestamptz,
    report_missing boolean DEFAULT true,
    source         text DEFAULT NULL)
RETURNS TABLE (
    line       integer,
    payment_id text,
    order_id   text,
    outcome    text,
    detail     text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row      record;
    -- The checked rows: an array appended in place (a jsonb array would be
    -- copied whole by each append, quadratic in the rows).
    v_rows     jsonb[] := '{}';
    v_line     integer;
    v_key      text;
    v_amount   numeric;
    v_at       timestamptz;
    v_dup      text;
    v_pay      ordertimeout.payments;
    v_order    ordertimeout.orders;
    v_result   text;
    v_kind     text;
    v_watermark timestamptz;
    v_refunding boolean;
    v_differs  boolean;
    v_locked   text[];
    v_accounts text[];
BEGIN
    IF reconcile_payments.transactions IS NULL THEN
        RAISE EXCEPTION 'transactions must not be null' USING ERRCODE = 'OT100';
    END IF;
    IF reconcile_payments.period_start IS NULL OR reconcile_payments.period_end IS NULL
       OR reconcile_payments.report_missing IS NULL THEN
        RAISE EXCEPTION 'period_start, period_end and report_missing must not be null' USING ERRCODE = 'OT100';
    END IF;
    IF jsonb_typeof(reconcile_payments.transactions) <> 'array' THEN
        RAISE EXCEPTION 'transactions must be a JSON array of gateway transactions, got a JSON %',
            jsonb_typeof(reconcile_payments.transactions)
            USING ERRCODE = 'OT170';
    END IF;
    IF jsonb_array_length(reconcile_payments.transactions) > 100000 THEN
        RAISE EXCEPTION 'transactions has % rows: at most 100000 per call (split the file by period)',
            jsonb_array_length(reconcile_payments.transactions)
            USING ERRCODE = 'OT170';
    END IF;
    -- In seconds since the epoch (numeric, ±Infinity for infinite bounds):
    -- timestamp arithmetic would raise 22008 on an infinite bound and wrap
    -- around on a span of centuries.
    IF NOT (reconcile_payments.period_start < reconcile_payments.period_end)
       OR extract(epoch FROM reconcile_payments.period_end) - extract(epoch FROM reconcile_payments.period_start)
          > 400 * 86400 THEN
        RAISE EXCEPTION 'the period must start before it ends and span at most 400 days, got % to %',
            reconcile_payments.period_start, reconcile_payments.period_end
            USING ERRCODE = 'OT172';
    END IF;
    IF reconcile_payments.source IS NOT NULL AND reconcile_payments.source !~ '^[a-z][a-z0-9_:.-]{0,63}$' THEN
        RAISE EXCEPTION 'source must be 1 to 64 characters a-z, 0-9, _ : . -, starting with a letter, got "%"',
            ordertimeout._shown(reconcile_payments.source, 64)
            USING ERRCODE = 'OT173';
    END IF;
    -- The watermark says "reconciled up to here", and continuous
    -- reconciliation asks the gateway only from a little before it: a
    -- period that left a gap after it, or that ends in the future, would
    -- move it past payments never reconciled. It only moves forward, so a
    -- concurrent call can only make the check below easier to pass.
    IF reconcile_payments.source IS NOT NULL THEN
        IF reconcile_payments.period_end > clock_timestamp() THEN
            RAISE EXCEPTION 'period_end % is in the future (now %): a source''s watermark moves only to a moment that has passed',
                reconcile_payments.period_end, clock_timestamp()
                USING ERRCODE = 'OT175';
        END IF;
        SELECT w.watermark INTO v_watermark
        FROM ordertimeout.reconcile_watermarks AS w
        WHERE w.source = reconcile_payments.source;
        IF reconcile_payments.period_start > v_watermark THEN
            RAISE EXCEPTION 'period_start % is after the watermark % of source "%": the time between them was never reconciled (start the period at or before the watermark)',
                reconcile_payments.period_start, v_watermark, reconcile_payments.source
                USING ERRCODE = 'OT174';
        END IF;
    END IF;

    -- 1. Check every row before writing anything.
    FOR v_row IN SELECT e.value, e.ordinality::integer AS n
                   FROM jsonb_array_elements(reconcile_payments.transactions) WITH ORDINALITY AS e LOOP
        v_line := v_row.n;
        IF jsonb_typeof(v_row.value) <> 'object' THEN
            RAISE EXCEPTION 'line %: a transaction must be a JSON object, got a JSON %', v_line, jsonb_typeof(v_row.value)
                USING ERRCODE = 'OT171';
        END IF;
        IF v_row.value ? 'line' THEN
            IF jsonb_typeof(v_row.value -> 'line') <> 'number' OR (v_row.value ->> 'line') !~ '^[1-9][0-9]{0,8}$' THEN
                RAISE EXCEPTION 'line %: line must be a positive integer', v_line USING ERRCODE = 'OT171';
            END IF;
            v_line := (v_row.value ->> 'line')::integer;
        END IF;
        SELECT k INTO v_key FROM jsonb_object_keys(v_row.value) AS k
         WHERE k NOT IN ('payment_id', 'order_id', 'amount', 'currency', 'status', 'at', 'line') ORDER BY 1 LIMIT 1;
        IF v_key IS NOT NULL THEN
            RAISE EXCEPTION 'line %: unknown field "%" (allowed: payment_id, order_id, amount, currency, status, at, line)',
                v_line, ordertimeout._shown(v_key, 64) USING ERRCODE = 'OT171';
        END IF;
        IF jsonb_typeof(v_row.value -> 'payment_id') IS DISTINCT FROM 'string'
           OR NOT ordertimeout._is_identifier(v_row.value ->> 'payment_id', 128) THEN
            RAISE EXCEPTION 'line %: payment_id must be an id of 1 to 128 characters', v_line USING ERRCODE = 'OT171';
        END IF;
        IF jsonb_typeof(v_row.value -> 'order_id') IS DISTINCT FROM 'string'
           OR NOT ordertimeout._is_identifier(v_row.value ->> 'order_id', 64) THEN
            RAISE EXCEPTION 'line %: order_id must be an id of 1 to 64 characters', v_line USING ERRCODE = 'OT171';
        END IF;
        v_amount := ordertimeout._parse_amount(v_row.value -> 'amount');
        IF v_amount IS NULL THEN
            RAISE EXCEPTION 'line %: amount must be a decimal number from 0 to below 10^15 with at most 6 decimals, got %',
                v_line, ordertimeout._shown(coalesce(v_row.value ->> 'amount', 'nothing'), 40) USING ERRCODE = 'OT171';
        END IF;
        IF jsonb_typeof(v_row.value -> 'currency') IS DISTINCT FROM 'string'
           OR (v_row.value ->> 'currency') !~ '^[A-Z]{3}$' THEN
            RAISE EXCEPTION 'line %: currency must be three upper-case letters (ISO 4217)', v_line USING ERRCODE = 'OT171';
        END IF;
        IF (v_row.value ->> 'status') IS DISTINCT FROM 'paid' AND (v_row.value ->> 'status') IS DISTINCT FROM 'refunded'
           OR jsonb_typeof(v_row.value -> 'status') <> 'string' THEN
            RAISE EXCEPTION 'line %: status must be "paid" or "refunded"', v_line USING ERRCODE = 'OT171';
        END IF;
        v_at := ordertimeout._parse_time(v_row.value -> 'at');
        IF v_at IS NULL THEN
            RAISE EXCEPTION 'line %: at must be an ISO 8601 time with a zone, such as 2026-12-01T10:00:00Z', v_line
                USING ERRCODE = 'OT171';
        END IF;
        -- A file of another period (yesterday's, run again for today)
        -- would move the watermark past payments never read. The end is
        -- taken too: a run that stops at MaxRows ends its period at the
        -- last transaction it applies.
        IF v_at < reconcile_payments.period_start OR v_at > reconcile_payments.period_end THEN
            RAISE EXCEPTION 'line %: at % is outside the period % to %: is this the file of another period?',
                v_line, v_at, reconcile_payments.period_start, reconcile_payments.period_end
                USING ERRCODE = 'OT171';
        END IF;
        v_rows := array_append(v_rows, jsonb_build_object(
            'line', v_line, 'payment_id', v_row.value ->> 'payment_id', 'order_id', v_row.value ->> 'order_id',
            'amount', v_amount, 'currency', v_row.value ->> 'currency', 'status', v_row.value ->> 'status', 'at', v_at));
    END LOOP;
    SELECT format('line %s: payment %s is %s twice in the transactions', max((r ->> 'line')::integer),
                  r ->> 'payment_id', r ->> 'status')
    INTO v_dup
    FROM unnest(v_rows) AS r
    GROUP BY r ->> 'payment_id', r ->> 'status'
    HAVING count(*) > 1
    LIMIT 1;
    IF v_dup IS NOT NULL THEN
        RAISE EXCEPTION '%', v_dup USING ERRCODE = 'OT171';
    END IF;

    -- 2. Each gateway transaction against what this database knows.
    -- Every lock a confirmation may need is taken first, in the lock order
    -- of every other function (order rows by order_id, then stock rows by
    -- sku, then points accounts): the rows of the orders whose lost
    -- callbacks this call may confirm, their stock rows and their points
    -- accounts. Confirming line by line would take order A, A's stock rows,
    -- then order B and B's stock rows, and deadlock with a confirm_payment
    -- of B waiting for A's stock, or with a create_order that holds B's sku
    -- and waits for one of A's. (The stock of an order whose line turns out
    -- a conflict stays locked for nothing until the commit.)
    -- Each row knows whether the call also lists its payment refunded
    -- (refunded_too: a window over the rows, not a look per row).
    SELECT coalesce(array_agg(l.order_id), '{}'),
           coalesce(array_agg(DISTINCT l.points_account) FILTER (WHERE l.points_account IS NOT NULL), '{}')
    INTO v_locked, v_accounts
    FROM (SELECT o.order_id, o.points_account
            FROM ordertimeout.orders AS o
           WHERE o.order_id IN (
                     SELECT r.value ->> 'order_id'
                     FROM (SELECT x AS value, bool_or(x ->> 'status' = 'refunded') OVER (PARTITION BY x ->> 'payment_id') AS refunded_too
                             FROM unnest(v_rows) AS x) AS r
                     LEFT JOIN ordertimeout.payments AS p ON p.payment_id = r.value ->> 'payment_id'
                     WHERE r.value ->> 'status' = 'paid'
                       AND NOT r.refunded_too
                       AND (p.payment_id IS NULL
                            OR (p.order_id = r.value ->> 'order_id' AND p.status NOT IN ('confirmed', 'late', 'refunded'))))
           ORDER BY o.order_id
             FOR NO KEY UPDATE) AS l;
    PERFORM 1
    FROM ordertimeout.stock AS s
    WHERE s.sku IN (SELECT i.sku FROM ordertimeout.order_items AS i WHERE i.order_id = ANY (v_locked))
    ORDER BY s.sku
    FOR NO KEY UPDATE;
    IF cardinality(v_accounts) > 0 THEN
        PERFORM 1
        FROM ordertimeout.points_accounts AS a
        WHERE a.account_id = ANY (v_accounts)
        ORDER BY a.account_id
        FOR NO KEY UPDATE;
    END IF;

    FOR v_row IN SELECT r.value, r.refunded_too
                   FROM (SELECT x AS value, bool_or(x ->> 'status' = 'refunded') OVER (PARTITION BY x ->> 'payment_id') AS refunded_too
                           FROM unnest(v_rows) AS x) AS r
                  ORDER BY (r.value ->> 'line')::integer LOOP
        line := (v_row.value ->> 'line')::integer;
        payment_id := v_row.value ->> 'payment_id';
        order_id := v_row.value ->> 'order_id';
        detail := NULL;
        v_amount := (v_row.value ->> 'amount')::numeric;
        SELECT p.* INTO v_pay FROM ordertimeout.payments AS p WHERE p.payment_id = reconcile_payments.payment_id;
        SELECT o.* INTO v_order FROM ordertimeout.orders AS o WHERE o.order_id = reconcile_payments.order_id;
        -- A payment recorded here of another amount or currency than the
        -- gateway's row (none recorded: nothing to compare).
        v_differs := (v_pay.amount IS NOT NULL AND v_pay.amount <> v_amount)
                     OR (v_pay.currency IS NOT NULL AND v_pay.currency <> (v_row.value ->> 'currency'));
        IF v_order.order_id IS NULL THEN
            outcome := 'unknown_order';
            detail := 'the gateway has a transaction for an order this database does not know';
            SELECT format('the gateway has a transaction for order %s, which purge_orders deleted at %s (payment %s was of it): check it at the gateway',
                          g.order_id, g.purged_at, g.payment_id)
            INTO detail
            FROM ordertimeout.purged_payments AS g
            WHERE g.payment_id = reconcile_payments.payment_id AND g.order_id = reconcile_payments.order_id;
            detail := coalesce(detail, 'the gateway has a transaction for an order this database does not know');
        ELSIF v_pay.payment_id IS NOT NULL AND v_pay.order_id <> order_id THEN
            outcome := 'other_order';
            detail := format('payment %s belongs to order %s here', v_pay.payment_id, v_pay.order_id);
        ELSIF v_pay.payment_id IS NULL
              AND EXISTS (SELECT 1 FROM ordertimeout.purged_payments AS g WHERE g.payment_id = reconcile_payments.payment_id) THEN
            -- The payment of a purged order (whose id a new order may have
            -- taken): not this order's money.
            outcome := 'other_order';
            SELECT format('payment %s was of order %s, purged at %s: not a payment of order %s here',
                          g.payment_id, g.order_id, g.purged_at, reconcile_payments.order_id)
            INTO detail
            FROM ordertimeout.purged_payments AS g
            WHERE g.payment_id = reconcile_payments.payment_id;
        ELSIF v_row.value ->> 'status' = 'refunded' THEN
            -- A refund made here, or claimed here and under way (the
            -- sidecar has refunded at the gateway and finish_refund will
            -- record it), gives back the payment's amount.
            v_refunding := v_pay.status = 'late'
                           AND EXISTS (SELECT 1 FROM ordertimeout.conflicts AS c
                                        WHERE c.payment_id = v_pay.payment_id AND c.state = 'refunding');
            IF (v_pay.status = 'refunded' OR v_refunding) AND v_differs THEN
                outcome := 'amount_differs';
                detail := format('%s here %s %s; the gateway refunded %s %s',
                                 CASE WHEN v_refunding THEN 'being refunded' ELSE 'refunded' END,
                                 coalesce(v_pay.amount::text, 'an unknown amount'), coalesce(v_pay.currency, ''),
                                 v_amount, v_row.value ->> 'currency');
            ELSIF v_refunding THEN
                outcome := 'known_conflict';
                detail := 'its conflict''s refund, claimed here, is under way: finish_refund records it';
            ELSIF v_pay.status = 'refunded' THEN
                outcome := 'ok';
            ELSE
                outcome := 'refund_unknown';
                detail := format('refunded at the gateway; here the payment is %s', coalesce(v_pay.status, 'unknown'));
            END IF;
        ELSIF v_pay.status = 'confirmed' THEN
            -- Confirmed without an amount (unverified): the gateway's amount
            -- is checked against the order's, when it has one.
            -- An order without a currency takes any, as in _confirm_payment.
            IF v_pay.amount IS NULL AND v_order.amount IS NOT NULL
               AND (v_order.amount <> v_amount
                    OR (v_order.currency IS NOT NULL AND v_order.currency <> (v_row.value ->> 'currency'))) THEN
                outcome := 'amount_differs';
                detail := format('confirmed here without an amount for an order of %s %s; the gateway settled %s %s',
                                 v_order.amount, coalesce(v_order.currency, ''), v_amount, v_row.value ->> 'currency');
            ELSIF v_pay.amount IS NULL AND v_pay.currency IS NOT NULL
               AND v_pay.currency <> (v_row.value ->> 'currency') THEN
                outcome := 'amount_differs';
                detail := format('confirmed here without an amount in %s; the gateway settled %s %s',
                                 v_pay.currency, v_amount, v_row.value ->> 'currency');
            ELSIF v_pay.amount IS NULL THEN
                outcome := 'ok';
                detail := format('confirmed here without an amount; the gateway settled %s %s',
                                 v_amount, v_row.value ->> 'currency');
            ELSIF NOT v_differs THEN
                -- Confirmed without a currency (its order has none): any
                -- currency, as in _confirm_payment.
                outcome := 'ok';
            ELSE
                outcome := 'amount_differs';
                detail := format('paid here %s %s, at the gateway %s %s', v_pay.amount, coalesce(v_pay.currency, ''),
                                 v_amount, v_row.value ->> 'currency');
            END IF;
        ELSIF v_pay.status IN ('late', 'refunded') THEN
            -- A conflict's refund gives back the amount recorded here: one
            -- the gateway did not take is money nobody accounts for.
            IF v_differs THEN
                outcome := 'amount_differs';
                detail := format('a conflict here of %s %s (%s); the gateway settled %s %s',
                                 coalesce(v_pay.amount::text, 'an unknown amount'), coalesce(v_pay.currency, ''),
                                 v_pay.status, v_amount, v_row.value ->> 'currency');
            ELSE
                outcome := 'known_conflict';
            END IF;
        ELSIF v_row.refunded_too THEN
            -- Paid and refunded at the gateway, neither seen here: no money
            -- stayed, so the order is not paid with it (a refunded payment
            -- never pays its order); a person looks at both lines.
            outcome := 'refund_unknown';
            detail := format('paid and refunded at the gateway; here the payment is %s: not confirmed',
                             coalesce(v_pay.status, 'unknown'));
        ELSIF v_pay.payment_id IS NULL
              AND (v_row.value ->> 'at')::timestamptz < v_order.created_at - interval '5 minutes' THEN
            -- Money this database has not seen, taken before the order was
            -- created (by more than the two clocks may differ: 5 minutes): a
            -- payment of an earlier order under the same id (purged, its id
            -- taken again), whose callback never came. Not this order's
            -- money: a person refunds the earlier buyer.
            outcome := 'other_order';
            detail := format('paid at the gateway at %s, before order %s here was created (%s): a payment of an earlier order under this id?',
                             (v_row.value ->> 'at')::timestamptz, v_order.order_id, v_order.created_at);
        ELSIF v_pay.payment_id IS NULL
              AND EXISTS (SELECT 1 FROM ordertimeout.purged_orders AS g
                           WHERE g.order_id = v_order.order_id
                             AND (v_row.value ->> 'at')::timestamptz < g.purged_at + interval '5 minutes') THEN
            -- The same, for an order given the id soon after purge_orders
            -- deleted the earlier one (purged_orders): money taken before
            -- that purge (5 minutes allowed for the clocks) may be the
            -- earlier buyer's, whose callback never came. Not confirmed: a
            -- person checks it at the gateway.
            outcome := 'other_order';
            SELECT format('paid at the gateway at %s, before order %s was purged at %s and given again (order created %s): a payment of the purged order?',
                          (v_row.value ->> 'at')::timestamptz, g.order_id, g.purged_at, v_order.created_at)
            INTO detail
            FROM ordertimeout.purged_orders AS g
            WHERE g.order_id = v_order.order_id;
        ELSE
            -- Money this database has not seen: a lost callback. Confirm it
            -- as a callback would have, with cause reconcile.
            v_result := ordertimeout._confirm_payment(order_id, payment_id, v_amount, v_row.value ->> 'currency',
                                                      'reconcile');
            IF v_result = 'paid' THEN
                outcome := 'confirmed';
                detail := 'paid at the gateway without a callback: now PAID';
            ELSE
                SELECT c.kind INTO v_kind FROM ordertimeout.conflicts AS c WHERE c.payment_id = reconcile_payments.payment_id;
                outcome := v_kind;
                detail := 'paid at the gateway without a callback: recorded as a conflict (cause reconcile)';
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- 3. Payments confirmed here in the period that the gateway does not list.
    IF reconcile_payments.report_missing THEN
        RETURN QUERY
        SELECT NULL::integer, p.payment_id, p.order_id, 'missing_at_gateway'::text,
               format('confirmed here at %s; the gateway lists no such payment', p.confirmed_at)
        FROM ordertimeout.payments AS p
        WHERE p.status = 'confirmed'
          AND p.confirmed_at >= reconcile_payments.period_start
          AND p.confirmed_at < reconcile_payments.period_end
          -- A lost callback reconciliation found (confirmed, or a late
          -- payment reinstated since): the gateway listed it already, in
          -- the period of its own time.
          AND NOT EXISTS (SELECT 1 FROM ordertimeout.events AS e
                           WHERE e.order_id = p.order_id AND e.to_status = 'PAID' AND e.cause = 'reconcile'
                             AND e.detail ->> 'payment_id' = p.payment_id)
          AND NOT EXISTS (SELECT 1 FROM ordertimeout.conflicts AS c
                           WHERE c.payment_id = p.payment_id AND c.cause = 'reconcile')
          AND p.payment_id NOT IN (SELECT r ->> 'payment_id' FROM unnest(v_rows) AS r WHERE r ->> 'status' = 'paid')
        ORDER BY p.confirmed_at, p.payment_id;
    END IF;

    IF reconcile_payments.source IS NOT NULL THEN
        INSERT INTO ordertimeout.reconcile_watermarks AS w (source, watermark, updated_at)
        VALUES (reconcile_payments.source, reconcile_payments.period_end, clock_timestamp())
        ON CONFLICT ON CONSTRAINT reconcile_watermarks_pkey DO UPDATE
        SET watermark = greatest(w.watermark, excluded.watermark),
            updated_at = excluded.updated_at;
    END IF;
END
$$;

COMMENT ON FUNCTION ordertimeout.reconcile_payments(jsonb, timestamptz, timestamptz, boolean, text) IS
    'reconciles the gateway''s transactions of a period, all or nothing: each row ok, confirmed (a lost callback on a live order, now PAID), a new conflict (late_payment, double_payment, amount_mismatch; cause reconcile), known_conflict (also a refund claimed here and under way), amount_differs (also for a known conflict or refund of another amount or currency), refund_unknown (also a payment the gateway lists as paid and refunded, not confirmed here), unknown_order or other_order; with report_missing, payments confirmed here in the period that the gateway does not list (missing_at_gateway); with source, advances its watermark to period_end (OT174 when the period starts after it, OT175 when it ends in the future). Running it again changes nothing';
