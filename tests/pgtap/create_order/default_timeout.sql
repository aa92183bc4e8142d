-- create_order without a timeout takes default_timeout and grace from the
-- settings.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);

CREATE TEMP TABLE first AS SELECT * FROM ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT is((SELECT expire_at - created_at FROM first), interval '30 minutes', 'the default timeout is 30 minutes');
SELECT is((SELECT cancel_at - expire_at FROM first), interval '60 seconds', 'the default grace is 60 seconds');

SELECT ordertimeout.configure(default_timeout => interval '5 minutes', grace => interval '0');
CREATE TEMP TABLE second AS SELECT * FROM ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT is((SELECT expire_at - created_at FROM second), interval '5 minutes', 'a configured default_timeout applies');
SELECT is((SELECT cancel_at FROM second), (SELECT expire_at FROM second), 'grace 0: cancel_at = expire_at');

SELECT * FROM finish();
ROLLBACK;
