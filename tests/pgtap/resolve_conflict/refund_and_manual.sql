-- resolve_conflict refund claims the conflict for a refund; finish_refund
-- records it: the payment is refunded and the order stays CANCELLED. manual
-- only resolves the conflict. Each step logs an event.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(10);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku": "A", "qty": 1}]') FROM unnest(ARRAY['o1', 'o2']) AS id;
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['o1', 'o2']) AS id;
SELECT ordertimeout.confirm_payment('o1', 'p1');
SELECT ordertimeout.confirm_payment('o2', 'p2');

SELECT is(ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o1'), 'refund'),
    'refunding', 'refund returns refunding');
SELECT is((SELECT state FROM ordertimeout.conflicts WHERE order_id = 'o1'), 'refunding', 'the conflict is claimed for the refund');
SELECT is(ordertimeout.finish_refund((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o1'), 'R1'),
    'refunded', 'finish_refund returns refunded');
SELECT is((SELECT status FROM ordertimeout.payments WHERE payment_id = 'p1'), 'refunded', 'the payment is refunded');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'o1'), 'CANCELLED', 'the order stays CANCELLED');
SELECT is(ordertimeout.confirm_payment('o1', 'p1'), 'conflict', 'a repeat of the confirmation still returns conflict');

SELECT is(ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o2'), 'manual'),
    'manual', 'manual returns manual');
SELECT results_eq(
    $$SELECT o.status::text, p.status::text FROM ordertimeout.orders AS o JOIN ordertimeout.payments AS p USING (order_id) WHERE o.order_id = 'o2'$$,
    $$VALUES ('CANCELLED', 'late')$$,
    'manual changes neither the order nor the payment');
SELECT results_eq(
    $$SELECT order_id, resolution, state, refund_id FROM ordertimeout.conflicts ORDER BY order_id$$,
    $$VALUES ('o1', 'refunded', 'resolved', 'R1'), ('o2', 'manual', 'resolved', NULL)$$,
    'both conflicts are resolved');
SELECT results_eq(
    $$SELECT order_id, from_status, to_status, cause::text, detail ->> 'resolution' FROM ordertimeout.events WHERE cause = 'conflict' ORDER BY event_id$$,
    $$VALUES ('o1', 'CANCELLED', 'CANCELLED', 'conflict', 'refunding'), ('o1', 'CANCELLED', 'CANCELLED', 'conflict', 'refunded'),
             ('o2', 'CANCELLED', 'CANCELLED', 'conflict', 'manual')$$,
    'an event per resolution, cause conflict');

SELECT * FROM finish();
ROLLBACK;
