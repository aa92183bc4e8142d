-- The payment method each attempt was started with; NULL: the order's.
ALTER TABLE ordertimeout.payments
    ADD COLUMN method text,
    ADD CONSTRAINT payments_method_known
        FOREIGN KEY (method) REFERENCES ordertimeout.payment_methods (method);
COMMENT ON COLUMN ordertimeout.payments.method IS
    'the payment method begin_payment started this attempt with (NULL: none named, or a confirmation without a begin: the order''s payment_method stands for it); decides the close at the cancel and the late-payment policy of this payment';

-- The attempts already recorded: the method their begin_payment logged.
UPDATE ordertimeout.payments AS p
SET method = e.method
FROM (SELECT DISTINCT ON (ev.detail ->> 'payment_id')
             ev.detail ->> 'payment_id' AS payment_id, ev.order_id, ev.detail ->> 'method' AS method
        FROM ordertimeout.events AS ev
       WHERE ev.to_status = 'PAYING'
         AND ev.cause = 'payment'
         AND ev.detail ->> 'method' IS NOT NULL
       ORDER BY ev.detail ->> 'payment_id', ev.event_id) AS e
WHERE p.payment_id = e.payment_id
  AND p.order_id = e.order_id
  AND EXISTS (SELECT 1 FROM ordertimeout.payment_methods AS m WHERE m.method = e.method);
