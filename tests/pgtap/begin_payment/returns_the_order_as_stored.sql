-- begin_payment returns the order as order_info reads it back right after:
-- every field (compared as text, the two being of different row types), for
-- an order with amount, currency, coupon, points and a payment method, for a
-- second attempt on a PAYING order, with an open conflict and with a
-- resolved one. begin_payment builds its answer from the row it updated (the
-- items from the normalized request create_order stored), so this is the
-- check that the two stay the same.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 10), ('C', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 1000);
SELECT ordertimeout.put_payment_method('card', interval '10 minutes');
-- Items given out of sku order and with a quantity written as 2.0: the
-- stored list is sorted and normalized.
SELECT ordertimeout.create_order('rich', '[{"sku": "C", "qty": 1}, {"sku": "A", "qty": 2.0}, {"sku": "B", "qty": 3}]',
    interval '1 hour',
    '{"amount": 12.50, "currency": "EUR", "coupon": "C1", "points_account": "acct", "points": 100, "method": "card"}');
SELECT ordertimeout.create_order('plain', '[{"sku": "A", "qty": 1}]');

CREATE TEMP TABLE begun AS SELECT * FROM ordertimeout.begin_payment('rich', 'p1');
SELECT is((SELECT b::text FROM begun AS b), ordertimeout.order_info('rich')::text,
          'an order with amount, currency, coupon, points and method: the same as order_info');
SELECT is((SELECT items FROM begun),
          '[{"sku": "A", "qty": 2}, {"sku": "B", "qty": 3}, {"sku": "C", "qty": 1}]'::jsonb,
          'its items sorted by sku, quantities as integers');

TRUNCATE begun;
INSERT INTO begun SELECT * FROM ordertimeout.begin_payment('rich', 'p2', interval '20 minutes', 'card');
SELECT is((SELECT b::text FROM begun AS b), ordertimeout.order_info('rich')::text,
          'a second attempt on the PAYING order: the same as order_info');

-- A wrong amount on a PAYING order: a conflict, and the order back to
-- PENDING once no attempt is in flight.
SELECT ordertimeout.confirm_payment('rich', 'p1', 1.00);
SELECT ordertimeout.fail_payment('rich', 'p2');
TRUNCATE begun;
INSERT INTO begun SELECT * FROM ordertimeout.begin_payment('rich', 'p3');
SELECT is((SELECT (b.open_conflicts, b::text)::text FROM begun AS b), (1, ordertimeout.order_info('rich')::text)::text,
          'with an open conflict: open_conflicts 1, the same as order_info');

-- Resolved, the conflict no longer counts.
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'rich'),
                                     'manual', 'settled by phone');
SELECT ordertimeout.fail_payment('rich', 'p3');
TRUNCATE begun;
INSERT INTO begun SELECT * FROM ordertimeout.begin_payment('rich', 'p5');
SELECT is((SELECT (b.open_conflicts, b::text)::text FROM begun AS b), (0, ordertimeout.order_info('rich')::text)::text,
          'with the conflict resolved: open_conflicts 0, the same as order_info');

TRUNCATE begun;
INSERT INTO begun SELECT * FROM ordertimeout.begin_payment('plain', 'p4');
SELECT is((SELECT b::text FROM begun AS b), ordertimeout.order_info('plain')::text,
          'an order with nothing but items: the same as order_info');

SELECT * FROM finish();
ROLLBACK;
