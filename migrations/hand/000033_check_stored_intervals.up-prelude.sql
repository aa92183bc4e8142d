-- The stored intervals follow the rule the functions check since 000029 (and
-- the month rule since 000010): days, hours, minutes and seconds, no month
-- part, no negative part. A value stored before, or by hand, that breaks it
-- is named here, and the migration stops until it is set again.
DO $check$
DECLARE
    v_bad text;
BEGIN
    SELECT string_agg(format('settings.%s = %s', c.name, c.value), ', ')
    INTO v_bad
    FROM ordertimeout.settings AS s
    CROSS JOIN LATERAL (VALUES ('default_timeout', s.default_timeout), ('grace', s.grace),
                               ('paying_window', s.paying_window), ('remind_before', s.remind_before)) AS c(name, value)
    WHERE c.value IS NOT NULL
      AND NOT (date_trunc('month', c.value) = interval '0' AND date_trunc('day', c.value) >= interval '0'
               AND c.value - date_trunc('day', c.value) >= interval '0');
    IF v_bad IS NULL THEN
        SELECT string_agg(format('payment method %s: paying_window = %s', m.method, m.paying_window), ', ')
        INTO v_bad
        FROM ordertimeout.payment_methods AS m
        WHERE NOT (date_trunc('month', m.paying_window) = interval '0' AND date_trunc('day', m.paying_window) >= interval '0'
                   AND m.paying_window - date_trunc('day', m.paying_window) >= interval '0');
    END IF;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'migration 000033: % has a month or a negative part; set it again with configure() or put_payment_method() in days, hours, minutes or seconds, then migrate', v_bad
            USING ERRCODE = 'check_violation';
    END IF;
END
$check$;

ALTER TABLE ordertimeout.settings
    ADD CONSTRAINT settings_default_timeout_plain_duration
        CHECK (date_trunc('month', default_timeout) = interval '0' AND date_trunc('day', default_timeout) >= interval '0'
              AND default_timeout - date_trunc('day', default_timeout) >= interval '0'),
    ADD CONSTRAINT settings_grace_plain_duration
        CHECK (date_trunc('month', grace) = interval '0' AND date_trunc('day', grace) >= interval '0'
              AND grace - date_trunc('day', grace) >= interval '0'),
    ADD CONSTRAINT settings_paying_window_plain_duration
        CHECK (date_trunc('month', paying_window) = interval '0' AND date_trunc('day', paying_window) >= interval '0'
              AND paying_window - date_trunc('day', paying_window) >= interval '0'),
    ADD CONSTRAINT settings_remind_before_plain_duration
        CHECK (date_trunc('month', remind_before) = interval '0' AND date_trunc('day', remind_before) >= interval '0'
              AND remind_before - date_trunc('day', remind_before) >= interval '0');

ALTER TABLE ordertimeout.payment_methods
    ADD CONSTRAINT payment_methods_paying_window_plain_duration
        CHECK (date_trunc('month', paying_window) = interval '0' AND date_trunc('day', paying_window) >= interval '0'
              AND paying_window - date_trunc('day', paying_window) >= interval '0');
