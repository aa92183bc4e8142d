-- Payment methods: each with its own paying window, because a bank transfer
-- or a QR code needs another window than a card. Changed with
-- ordertimeout.put_payment_method().

CREATE TABLE ordertimeout.payment_methods (
    method        text     NOT NULL,
    paying_window interval NOT NULL,
    gateway_close boolean  NOT NULL DEFAULT true,
    late_payment  text,
    CONSTRAINT payment_methods_pkey PRIMARY KEY (method),
    CONSTRAINT payment_methods_name_plain CHECK (method ~ '^[a-z][a-z0-9_]{0,31}$'),
    CONSTRAINT payment_methods_paying_window_in_range
        CHECK (paying_window > interval '0' AND paying_window <= interval '30 days'),
    CONSTRAINT payment_methods_late_payment_known
        CHECK (late_payment IN ('reinstate', 'refund', 'manual')),
    -- as settings_paying_window_plain_duration (sql/settings.sql)
    CONSTRAINT payment_methods_paying_window_plain_duration
        CHECK (date_trunc('month', paying_window) = interval '0' AND date_trunc('day', paying_window) >= interval '0'
              AND paying_window - date_trunc('day', paying_window) >= interval '0')
);

COMMENT ON TABLE ordertimeout.payment_methods IS
    'named payment methods a shop configures once: the paying window the gateway enforces, whether a cancel closes the payment at the gateway, and a late-payment policy that overrides settings.late_payment';
COMMENT ON COLUMN ordertimeout.payment_methods.gateway_close IS
    'false for methods the gateway cannot close (a bank transfer): no close is sent after a cancel';
COMMENT ON COLUMN ordertimeout.payment_methods.late_payment IS
    'the policy for money arriving after the cancel for orders paid this way; NULL: settings.late_payment';

INSERT INTO ordertimeout.payment_methods (method, paying_window, gateway_close, late_payment)
VALUES ('card', interval '15 minutes', true, NULL),
       ('qr', interval '2 hours', true, NULL),
       ('bank_transfer', interval '3 days', false, 'refund');
