-- order_events lists an order's events oldest first, with their causes and
-- actors: why the order is in the state it is in. Unknown order: OT120.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SET LOCAL ordertimeout.actor = 'user:42';
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1');
SELECT ordertimeout.fail_payment('o1', 'p1');
SELECT ordertimeout.extend_deadline('o1', interval '1 minute');
SET LOCAL ordertimeout.actor = 'sidecar';
SELECT ordertimeout.configure(precheck => 'never');
SELECT test.make_due('o1');
SELECT ordertimeout.sweep_due();
SELECT ordertimeout.confirm_payment('o1', 'p2');

SELECT results_eq(
    $$SELECT from_status, to_status, cause, actor FROM ordertimeout.order_events('o1')$$,
    $$VALUES (NULL::text, 'PENDING', 'requested', 'user:42'),
             ('PENDING', 'PAYING', 'payment', 'user:42'),
             ('PAYING', 'PENDING', 'payment', 'user:42'),
             ('PENDING', 'PENDING', 'requested', 'user:42'),
             ('PENDING', 'CANCELLED', 'timeout', 'sidecar'),
             ('CANCELLED', 'CANCELLED', 'payment', 'sidecar')$$,
    'every state change, oldest first, with cause and actor');
SELECT is((SELECT count(*)::integer FROM ordertimeout.order_events('o1') WHERE lateness IS NOT NULL), 1,
    'only the timeout has a lateness');
SELECT ok((SELECT bool_and(at IS NOT NULL) AND array_agg(event_id ORDER BY event_id) = array_agg(event_id)
             FROM ordertimeout.order_events('o1')),
    'each event has a time; ids ascending');
SELECT throws_ok($$SELECT * FROM ordertimeout.order_events('nope')$$, 'OT120', NULL, 'unknown order: OT120');
SELECT throws_ok($$SELECT * FROM ordertimeout.order_events(NULL)$$, 'OT100', NULL, 'NULL: OT100');

SELECT * FROM finish();
ROLLBACK;
