-- The payment method each attempt was started with. A constant default adds
-- the column without rewriting the table.
ALTER TABLE ordertimeout.payments
    ADD COLUMN method text,
    ADD COLUMN method_recorded boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT payments_method_known
        FOREIGN KEY (method) REFERENCES ordertimeout.payment_methods (method);
COMMENT ON COLUMN ordertimeout.payments.method IS
    'with method_recorded, the payment method of this attempt: the one begin_payment was given, else the order''s at that moment (NULL: none, the defaults); decides the close at the cancel and the late-payment policy of this payment';
COMMENT ON COLUMN ordertimeout.payments.method_recorded IS
    'whether method is recorded: false for a payment confirmed without a begin_payment, or begun before migration 000059 (unless its order had other payments: 000059 filled those from their events), for which the order''s payment_method stands until a begin_payment with another method records it';

-- The attempts already recorded of orders with more than one payment (the
-- only ones the order's last method can misread): the method their
-- begin_payment logged in its PAYING event, if it logged one (000010 on)
-- and it is still a known method.
UPDATE ordertimeout.payments AS p
SET method = e.method,
    method_recorded = true
FROM (SELECT DISTINCT ON (ev.detail ->> 'payment_id')
             ev.detail ->> 'payment_id' AS payment_id, ev.order_id, ev.detail ->> 'method' AS method
        FROM ordertimeout.events AS ev
       WHERE ev.order_id IN (SELECT q.order_id FROM ordertimeout.payments AS q
                              GROUP BY q.order_id HAVING count(*) > 1)
         AND ev.to_status = 'PAYING'
         AND ev.cause = 'payment'
         AND ev.detail ? 'method'
       ORDER BY ev.detail ->> 'payment_id', ev.event_id) AS e
WHERE p.payment_id = e.payment_id
  AND p.order_id = e.order_id
  AND p.started_at IS NOT NULL
  AND (e.method IS NULL OR EXISTS (SELECT 1 FROM ordertimeout.payment_methods AS m WHERE m.method = e.method));
