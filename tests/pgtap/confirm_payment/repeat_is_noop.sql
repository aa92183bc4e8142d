-- confirm_payment again for the same payment returns paid and writes nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 5}');
SELECT ordertimeout.confirm_payment('o1', 'p1', 5);
SELECT test.snapshot() AS before \gset

SELECT is(ordertimeout.confirm_payment('o1', 'p1', 5), 'paid', 'the repeat returns paid');
SELECT is(ordertimeout.confirm_payment('o1', 'p1'), 'paid', 'a repeat without the amount returns paid');
SELECT is(test.snapshot(), :'before'::jsonb, 'the repeats wrote nothing (stock sold once)');

SELECT * FROM finish();
ROLLBACK;
