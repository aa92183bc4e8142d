-- create_order with an existing order_id and the same content returns the
-- existing order and writes nothing, whatever the order of its items.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 5);
CREATE TEMP TABLE first AS
SELECT * FROM ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]', interval '10 minutes',
                                        '{"amount": 12.5, "currency": "EUR"}');
SELECT test.snapshot() AS before \gset

CREATE TEMP TABLE again AS
SELECT * FROM ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]', interval '10 minutes',
                                        '{"amount": 12.5, "currency": "EUR"}');
SELECT is((SELECT created FROM again), false, 'the repeat returns created = false');
SELECT is((SELECT (status, created_at, expire_at, cancel_at, deadline_version, items) FROM again),
          (SELECT (status, created_at, expire_at, cancel_at, deadline_version, items) FROM first),
          'the repeat returns the existing order');
SELECT is(test.snapshot(), :'before'::jsonb, 'the repeat wrote nothing (no second timer, event or reservation)');

CREATE TEMP TABLE reordered AS
SELECT * FROM ordertimeout.create_order('o1', '[{"qty": 2, "sku": "B"}, {"sku": "A", "qty": 1.0}]', interval '600 seconds',
                                        '{"currency": "EUR", "amount": 12.50}');
SELECT is((SELECT created FROM reordered), false, 'items in another order, keys reordered, 600 s for 10 min: same content');
SELECT is(test.snapshot(), :'before'::jsonb, 'that repeat wrote nothing either');

-- NULL options and '{}' are the same content.
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', NULL, NULL);
SELECT test.snapshot() AS before2 \gset
SELECT is((ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]')).created, false,
          'options NULL then {} (the default): same content');
SELECT is(test.snapshot(), :'before2'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
