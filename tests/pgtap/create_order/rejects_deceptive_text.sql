-- Identifiers and free text pass through logs, URLs and consoles: bidi
-- controls, zero-width and line-separator characters, control characters,
-- and the ids "." and ".." (dot segments in a URL path) are refused with the
-- field's code, and nothing is written. So is an ordertimeout.actor with
-- control characters or over 200 characters (OT148).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(17);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku":"A","qty":1}]');
SELECT test.snapshot() AS before \gset

SELECT throws_ok(format('SELECT ordertimeout.create_order(%L, %L)', id, '[{"sku":"A","qty":1}]'), 'OT101', NULL,
    'order_id ' || label || ': OT101')
FROM (VALUES (E'A\u202eB', 'with a bidi override'),
             (E'A\u2066B', 'with a bidi isolate'),
             (E'A\u200bB', 'with a zero-width space'),
             (E'A\ufeffB', 'with a byte order mark'),
             (E'A\u2028B', 'with a line separator'),
             (E'A\u0085B', 'with a C1 control'),
             ('.', '"."'),
             ('..', '".."')) AS t(id, label);
SELECT throws_ok(format('SELECT ordertimeout.begin_payment(%L, %L)', 'o1', E'p\u200d1'), 'OT121', NULL,
    'payment_id with a zero-width joiner: OT121');
SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', '..')$$, 'OT121', NULL, 'payment_id "..": OT121');
SELECT throws_ok(format('SELECT ordertimeout.cancel_order(%L, %L)', 'o1', E'fraud\nOK'), 'OT144', NULL,
    'a reason with a newline: OT144');
SELECT throws_ok(format('SELECT ordertimeout.cancel_order(%L, %L)', 'o1', E'ok\u202e'), 'OT144', NULL,
    'a reason with a bidi override: OT144');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SET LOCAL ordertimeout.actor = E'admin\x1b[31m';
SELECT throws_ok($$SELECT ordertimeout.cancel_order('o1')$$, 'OT148', NULL, 'an actor with an escape sequence: OT148');
SELECT set_config('ordertimeout.actor', repeat('x', 1000000), true);
SELECT throws_ok($$SELECT ordertimeout.cancel_order('o1')$$, 'OT148', NULL, 'a 1,000,000-character actor: OT148');
SET LOCAL ordertimeout.actor = 'user:42';
SELECT ok(ordertimeout.cancel_order('o1'), 'a plain actor acts');
SELECT is((SELECT actor FROM ordertimeout.events ORDER BY event_id DESC LIMIT 1), 'user:42', 'and is recorded');

SELECT * FROM finish();
ROLLBACK;
