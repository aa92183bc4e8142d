-- The order path (create_order, begin_payment, confirm_payment) with fewer
-- statements and fewer function frames per call, for the same answers:
--   * _is_plain_text and _is_identifier become SQL functions without SET,
--     which the planner inlines (a PL/pgSQL call with a pinned search_path
--     costs about 4 microseconds); _is_duration is the same test as
--     _check_interval's; the API functions call a _check_x helper (a
--     statement of its own) only when the quick test fails.
--   * _normalize_items returns the sorted arrays with the JSON and takes a
--     loop of expressions for up to 8 items; longer or invalid lists take
--     the old way, which raises the same errors.
--   * create_order reserves stock with one conditional UPDATE per SKU in sku
--     order instead of a locking SELECT and an UPDATE (no row-lock WAL
--     records), calls _log_event and _wake_if_sooner as expressions, and
--     builds its order_state from the values in hand.
--   * begin_payment and _confirm_payment lock the order with _lock_order as
--     an expression; _confirm_payment updates the payment row begin_payment
--     wrote (the upsert stays for a confirmation without a begin).
--   * _log_event skips _enqueue_webhooks when settings.webhooks is off.
-- _normalize_items and _wake_if_sooner change their result types, so they
-- are dropped and created again (nothing depends on them in the catalog).
-- Hand-written: the functions are the plpgsql/ files of this version; the
-- down migration restores those of 000012.

CREATE OR REPLACE FUNCTION ordertimeout._is_plain_text(value text, max_length integer)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT value IS NOT NULL
       AND char_length(value) BETWEEN 1 AND max_length
       AND value !~ '[\u0001-\u001F\u007F-\u009F\u00AD\u0600-\u0605\u061C\u06DD\u070F\u0890-\u0891\u08E2\u180E\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB\U000110BD\U000110CD\U00013430-\U0001343F\U0001BCA0-\U0001BCA3\U0001D173-\U0001D17A\U000E0001\U000E0020-\U000E007F]'
$$;

CREATE OR REPLACE FUNCTION ordertimeout._is_identifier(id text, max_length integer)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT ordertimeout._is_plain_text(id, max_length) AND id NOT IN ('.', '..')
$$;

CREATE FUNCTION ordertimeout._is_duration(value interval, max interval, allow_zero boolean DEFAULT false)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT value IS NULL
        OR (extract(month FROM value) = 0 AND extract(year FROM value) = 0
            AND (value > interval '0' OR (allow_zero AND value = interval '0'))
            AND value <= max)
$$;

DROP FUNCTION ordertimeout._normalize_items(jsonb);

CREATE FUNCTION ordertimeout._normalize_items(
    items          jsonb,
    OUT normalized jsonb,
    OUT skus       text[],
    OUT qtys       integer[])
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
    v_short    boolean;
    j          integer;
BEGIN
    v_count := CASE WHEN jsonb_typeof(items) = 'array' THEN jsonb_array_length(items) END;
    v_short := v_count BETWEEN 1 AND 8;
    IF v_short THEN
        skus := '{}';
        qtys := '{}';
        FOR i IN 0 .. v_count - 1 LOOP
            v_item := items -> i;
            IF jsonb_typeof(v_item) <> 'object' THEN
                v_short := false;
                EXIT;
            END IF;
            IF v_item - 'sku' - 'qty' <> '{}'
               OR jsonb_typeof(v_item -> 'sku') IS DISTINCT FROM 'string'
               OR jsonb_typeof(v_item -> 'qty') IS DISTINCT FROM 'number' THEN
                v_short := false;
                EXIT;
            END IF;
            v_sku := v_item ->> 'sku';
            v_qty := (v_item ->> 'qty')::numeric;
            IF NOT ordertimeout._is_plain_text(v_sku, 64) OR v_qty <> trunc(v_qty) OR v_qty NOT BETWEEN 1 AND 1000000 THEN
                v_short := false;
                EXIT;
            END IF;
            -- insert in sku order; a second entry of a sku declines
            j := i;
            WHILE j > 0 AND skus[j] > v_sku LOOP
                skus[j + 1] := skus[j];
                qtys[j + 1] := qtys[j];
                j := j - 1;
            END LOOP;
            IF j > 0 AND skus[j] = v_sku THEN
                v_short := false;
                EXIT;
            END IF;
            skus[j + 1] := v_sku;
            qtys[j + 1] := v_qty::integer;
        END LOOP;
        IF v_short THEN
            normalized := '[]';
            FOR i IN 1 .. v_count LOOP
                normalized := normalized || jsonb_build_object('sku', skus[i], 'qty', qtys[i]);
            END LOOP;
            RETURN;
        END IF;
    END IF;

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
        IF NOT ordertimeout._is_plain_text(v_sku, 64) THEN
            RAISE EXCEPTION 'items[%].sku must be 1 to 64 characters without control, format or line-separator characters', v_position
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
               ORDER BY e.value ->> 'sku'),
           array_agg(e.value ->> 'sku' ORDER BY e.value ->> 'sku'),
           array_agg((e.value ->> 'qty')::numeric::integer ORDER BY e.value ->> 'sku')
    INTO normalized, skus, qtys
    FROM jsonb_array_elements(items) AS e;
END
$$;

DROP FUNCTION ordertimeout._wake_if_sooner(timestamptz);

CREATE FUNCTION ordertimeout._wake_if_sooner(cancel_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cancel_at < coalesce((SELECT s.wake_at FROM ordertimeout.sweep_state AS s), 'infinity') THEN
        PERFORM pg_notify('ordertimeout_wake', '');
        RETURN true;
    END IF;
    RETURN false;
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout._log_event(
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
    -- Nested: the condition with the settings is a statement of its own.
    IF webhook THEN
        IF (SELECT s.webhooks FROM ordertimeout.settings AS s) THEN
            PERFORM ordertimeout._enqueue_webhooks(ARRAY[v_event_id]);
        END IF;
    END IF;
    RETURN v_event_id;
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout._confirm_payment(
    order_id   text,
    payment_id text,
    amount     numeric,
    currency   text,
    cause      text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_status     text;
    v_amount     numeric;
    v_currency   text;
    v_timer      bigint;
    v_pay_order  text;
    v_pay_status text;
    v_conflict   bigint;
    v_kind       text;
    v_mismatch   boolean;
    v_paid_cur   text;
    v_detail     jsonb;
    v_order      ordertimeout.orders;
    v_event_id   bigint;
BEGIN
    -- Each check helper runs only when its argument fails the quick test
    -- (see plpgsql/checks.sql), and raises the error naming the field.
    IF NOT ordertimeout._is_identifier(_confirm_payment.order_id, 64) THEN
        PERFORM ordertimeout._check_order_id(_confirm_payment.order_id);
    END IF;
    IF NOT ordertimeout._is_identifier(_confirm_payment.payment_id, 128) THEN
        PERFORM ordertimeout._check_payment_id(_confirm_payment.payment_id);
    END IF;
    IF _confirm_payment.amount IS NOT NULL THEN
        PERFORM ordertimeout._check_amount('amount', _confirm_payment.amount);
    END IF;
    IF _confirm_payment.currency IS NOT NULL AND _confirm_payment.currency !~ '^[A-Z]{3}$' THEN
        RAISE EXCEPTION 'currency must be a three-letter ISO 4217 code such as "EUR", got "%"',
            left(_confirm_payment.currency, 16)
            USING ERRCODE = 'OT128';
    END IF;

    -- The order row lock serializes every transition of this order, and
    -- close_cancelled (which takes the same lock) with the conflict below.
    v_order := ordertimeout._lock_order(_confirm_payment.order_id);
    v_status := v_order.status;
    v_amount := v_order.amount;
    v_currency := v_order.currency;
    v_timer := v_order.timer_job_id;

    SELECT p.order_id, p.status INTO v_pay_order, v_pay_status
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = _confirm_payment.payment_id;
    IF FOUND AND v_pay_order <> _confirm_payment.order_id THEN
        RAISE EXCEPTION 'payment_id "%" belongs to another order', _confirm_payment.payment_id
            USING ERRCODE = 'OT124';
    END IF;
    -- The same confirmation again: the same answer, nothing written.
    IF v_pay_status = 'confirmed' THEN
        RETURN 'paid';
    ELSIF v_pay_status IN ('late', 'refunded') THEN
        RETURN 'conflict';
    END IF;

    v_paid_cur := coalesce(_confirm_payment.currency, v_currency);
    v_mismatch := (_confirm_payment.amount IS NOT NULL AND v_amount IS NOT NULL AND _confirm_payment.amount <> v_amount)
               OR (v_paid_cur IS DISTINCT FROM v_currency AND v_currency IS NOT NULL);

    UPDATE ordertimeout.orders AS o
    SET status = 'PAID',
        paid_at = v_now,
        paying_until = NULL,
        deadline_version = o.deadline_version + 1,
        timer_job_id = NULL,
        check_job_id = NULL
    WHERE o.order_id = _confirm_payment.order_id
      AND o.status IN ('PENDING', 'PAYING')
      AND NOT v_mismatch;

    IF FOUND THEN
        -- begin_payment wrote the payment's row, as a rule: update it; insert
        -- one only for a confirmation without a begin.
        UPDATE ordertimeout.payments AS p
        SET status = 'confirmed',
            amount = coalesce(_confirm_payment.amount, p.amount),
            currency = v_paid_cur,
            confirmed_at = v_now
        WHERE p.payment_id = _confirm_payment.payment_id
          AND p.order_id = _confirm_payment.order_id;
        IF NOT FOUND THEN
            INSERT INTO ordertimeout.payments AS p (payment_id, order_id, status, amount, currency, confirmed_at)
            VALUES (_confirm_payment.payment_id, _confirm_payment.order_id, 'confirmed', _confirm_payment.amount,
                    v_paid_cur, v_now)
            ON CONFLICT ON CONSTRAINT payments_pkey DO UPDATE
            SET status = 'confirmed',
                amount = coalesce(excluded.amount, p.amount),
                currency = excluded.currency,
                confirmed_at = excluded.confirmed_at;
        END IF;
        PERFORM ordertimeout._drop_timer(v_timer);
        v_detail := jsonb_build_object('payment_id', _confirm_payment.payment_id, 'amount', _confirm_payment.amount,
                                       'currency', v_paid_cur);
        IF _confirm_payment.amount IS NULL AND v_amount IS NOT NULL THEN
            v_detail := v_detail || jsonb_build_object('unverified', true);
        END IF;
        v_event_id := ordertimeout._log_event(_confirm_payment.order_id, v_status, 'PAID', _confirm_payment.cause, v_now, v_detail,
            webhook => true);
        -- Last, so that the stock rows stay locked only until the commit.
        PERFORM ordertimeout._consume(_confirm_payment.order_id, v_now);
        RETURN 'paid';
    END IF;

    -- Money the order cannot take (cancelled, already paid, or the wrong
    -- amount or currency): never dropped, never re-opening the order on its
    -- own. A conflict row, and a wake-up.
    v_kind := CASE
                  WHEN v_status IN ('PAID', 'REFUNDED') THEN 'double_payment'
                  WHEN v_mismatch THEN 'amount_mismatch'
                  ELSE 'late_payment'
              END;
    INSERT INTO ordertimeout.payments AS p (payment_id, order_id, status, amount, currency, confirmed_at)
    VALUES (_confirm_payment.payment_id, _confirm_payment.order_id, 'late', _confirm_payment.amount, v_paid_cur, v_now)
    ON CONFLICT ON CONSTRAINT payments_pkey DO UPDATE
    SET status = 'late',
        amount = coalesce(excluded.amount, p.amount),
        currency = excluded.currency,
        confirmed_at = excluded.confirmed_at;
    INSERT INTO ordertimeout.conflicts (order_id, payment_id, kind, amount, currency, detected_at, cause)
    VALUES (_confirm_payment.order_id, _confirm_payment.payment_id, v_kind, _confirm_payment.amount, v_paid_cur, v_now,
            _confirm_payment.cause)
    RETURNING conflict_id INTO v_conflict;

    -- A finished order with an open conflict is no longer finished: a CLOSED
    -- order goes back to CANCELLED (close_cancelled closes it again once the
    -- conflict is resolved). Touching the row of a CANCELLED order makes a
    -- concurrent close_cancelled under REPEATABLE READ fail rather than
    -- close it past this conflict.
    IF v_status IN ('CANCELLED', 'CLOSED') THEN
        UPDATE ordertimeout.orders AS o
        SET status = 'CANCELLED',
            closed_at = NULL,
            deadline_version = o.deadline_version + 1
        WHERE o.order_id = _confirm_payment.order_id;
    END IF;
    PERFORM ordertimeout._log_event(_confirm_payment.order_id, v_status,
        CASE WHEN v_status = 'CLOSED' THEN 'CANCELLED' ELSE v_status END, _confirm_payment.cause, v_now,
        jsonb_build_object('payment_id', _confirm_payment.payment_id, 'conflict_id', v_conflict, 'kind', v_kind,
                           'amount', _confirm_payment.amount, 'currency', v_paid_cur),
        webhook => true);
    -- Only a wake-up: the listener reads the open conflicts from the table.
    PERFORM pg_notify('ordertimeout_conflict', '');
    IF v_status = 'PAYING' THEN
        -- this attempt is over: without another one in flight, the timeout applies again
        PERFORM ordertimeout._back_to_pending(_confirm_payment.order_id, v_now,
            jsonb_build_object('payment_id', _confirm_payment.payment_id, 'conflict_id', v_conflict));
    END IF;
    RETURN 'conflict';
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout.create_order(
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
    -- order if the content is the same, an error if not.
    INSERT INTO ordertimeout.orders AS o (
        order_id, status, created_at, expire_at, cancel_at, timer_job_id, precheck,
        amount, currency, coupon_id, points_account, points, request, payment_method)
    VALUES (
        create_order.order_id, 'PENDING', v_now, v_expire, v_cancel, ordertimeout._new_job_id(),
        v_options ->> 'precheck', (v_options ->> 'amount')::numeric, v_options ->> 'currency',
        v_coupon, v_account, v_points, v_request, v_options ->> 'method')
    ON CONFLICT ON CONSTRAINT orders_pkey DO NOTHING
    RETURNING o.timer_job_id INTO v_job_id;

    IF v_job_id IS NULL THEN
        SELECT o.request INTO v_existing FROM ordertimeout.orders AS o WHERE o.order_id = create_order.order_id;
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

    IF v_settings.webhooks AND v_settings.remind_before IS NOT NULL
       AND v_expire - v_settings.remind_before > v_now THEN
        PERFORM ordertimeout._insert_job(
            'ordertimeout_webhook',
            jsonb_build_object('order_id', create_order.order_id, 'reminder', 'expiring_soon', 'version', 1),
            'ordertimeout',
            v_expire - v_settings.remind_before);
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

CREATE OR REPLACE FUNCTION ordertimeout.begin_payment(
    order_id      text,
    payment_id    text,
    paying_window interval DEFAULT NULL,
    method        text DEFAULT NULL)
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now         timestamptz := clock_timestamp();
    v_window      interval;
    v_status      text;
    v_expire      timestamptz;
    v_timer       bigint;
    v_pay_order   text;
    v_pay_status  text;
    v_until       timestamptz;
    v_gw_expire   timestamptz;
    v_job_id      bigint;
    v_method      text;
    v_grace       interval;
    v_order       ordertimeout.orders;
    v_event_id    bigint;
BEGIN
    -- Each check helper runs only when its argument fails the quick test
    -- (see plpgsql/checks.sql), and raises the error naming the field.
    IF NOT ordertimeout._is_identifier(begin_payment.order_id, 64) THEN
        PERFORM ordertimeout._check_order_id(begin_payment.order_id);
    END IF;
    IF NOT ordertimeout._is_identifier(begin_payment.payment_id, 128) THEN
        PERFORM ordertimeout._check_payment_id(begin_payment.payment_id);
    END IF;
    IF NOT ordertimeout._is_duration(begin_payment.paying_window, interval '30 days') THEN
        PERFORM ordertimeout._check_interval('paying_window', begin_payment.paying_window, interval '30 days', 'OT125');
    END IF;
    IF begin_payment.method IS NOT NULL THEN
        PERFORM ordertimeout._payment_method('method', begin_payment.method);
    END IF;

    v_order := ordertimeout._lock_order(begin_payment.order_id);
    v_status := v_order.status;
    v_expire := v_order.expire_at;
    v_timer := v_order.timer_job_id;
    v_method := coalesce(begin_payment.method, v_order.payment_method);

    SELECT p.order_id, p.status INTO v_pay_order, v_pay_status
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = begin_payment.payment_id;
    IF FOUND THEN
        IF v_pay_order <> begin_payment.order_id THEN
            RAISE EXCEPTION 'payment_id "%" belongs to another order', begin_payment.payment_id
                USING ERRCODE = 'OT124';
        END IF;
        IF v_status = 'PAYING' AND v_pay_status = 'started' THEN
            RETURN ordertimeout._order_state(begin_payment.order_id, false);   -- the same call again
        END IF;
        RAISE EXCEPTION 'payment_id "%" is already %; order "%" is %',
            begin_payment.payment_id, v_pay_status, begin_payment.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;

    IF v_status NOT IN ('PENDING', 'PAYING') THEN
        RAISE EXCEPTION 'order "%" is %: it takes no payment', begin_payment.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;
    IF v_expire <= v_now THEN
        RAISE EXCEPTION 'order "%" expired at %: start no payment for it', begin_payment.order_id, v_expire
            USING ERRCODE = 'OT122';
    END IF;

    SELECT coalesce(begin_payment.paying_window, m.paying_window, s.paying_window), s.grace
    INTO v_window, v_grace
    FROM ordertimeout.settings AS s
    LEFT JOIN ordertimeout.payment_methods AS m ON m.method = v_method;

    -- The payment check at paying_until: the sidecar asks the gateway.
    v_gw_expire := v_now + v_window;
    v_until := v_gw_expire + v_grace;
    v_job_id := ordertimeout._insert_job(
        'ordertimeout_payment_check',
        jsonb_build_object('order_id', begin_payment.order_id, 'payment_id', begin_payment.payment_id),
        'ordertimeout',
        v_until);

    UPDATE ordertimeout.orders AS o
    SET status = 'PAYING',
        paying_until = greatest(o.paying_until, v_until),
        gateway_expire_at = greatest(o.gateway_expire_at, v_gw_expire),
        cancel_at = greatest(o.cancel_at, v_until),
        payment_method = v_method,
        payment_attempted = true,
        deadline_version = o.deadline_version + 1,
        timer_job_id = v_job_id,
        check_job_id = NULL
    WHERE o.order_id = begin_payment.order_id
      AND o.status IN ('PENDING', 'PAYING')
      AND o.expire_at > v_now;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order "%" changed while starting the payment', begin_payment.order_id
            USING ERRCODE = 'OT123';
    END IF;

    INSERT INTO ordertimeout.payments (payment_id, order_id, status, started_at)
    VALUES (begin_payment.payment_id, begin_payment.order_id, 'started', v_now);

    IF v_status = 'PENDING' THEN
        PERFORM ordertimeout._drop_timer(v_timer);
    END IF;
    v_event_id := ordertimeout._log_event(begin_payment.order_id, v_status, 'PAYING', 'payment', v_now,
        jsonb_build_object('payment_id', begin_payment.payment_id, 'paying_until', v_until,
                           'gateway_expire_at', v_gw_expire, 'method', v_method));

    RETURN ordertimeout._order_state(begin_payment.order_id, false);
END
$$;

COMMENT ON FUNCTION ordertimeout.begin_payment(text, text, interval, text) IS
    'PENDING -> PAYING before the buyer is sent to the gateway, with the paying window of the call, else of the payment method, else of the settings; returns gateway_expire_at, the expiry to give the gateway; refused once the order has expired; the timeout no longer applies while PAYING and never comes before gateway_expire_at + grace';

REVOKE ALL ON FUNCTION ordertimeout._is_duration(interval, interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._normalize_items(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._wake_if_sooner(timestamptz) FROM PUBLIC;
