-- _normalize_items takes a short way (a loop of expressions) for up to 8
-- items and the long way (statements) for more, or for anything the short
-- way declines: both give the same normalized items, the same arrays and the
-- same errors. The quick tests the API functions run before their check
-- helpers (_is_identifier, _is_duration) pass exactly what the helpers pass.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(16);

INSERT INTO ordertimeout.stock (sku, available)
SELECT format('s%s', n), 100 FROM generate_series(1, 12) AS n;

-- 8 items (short way) and 9 items (long way), given in reverse sku order.
SELECT is((ordertimeout._normalize_items(
              (SELECT jsonb_agg(jsonb_build_object('qty', n, 'sku', format('s%s', n)) ORDER BY format('s%s', n) DESC)
                 FROM generate_series(1, 8) AS n))).normalized,
          (SELECT jsonb_agg(jsonb_build_object('sku', format('s%s', n), 'qty', n) ORDER BY format('s%s', n))
             FROM generate_series(1, 8) AS n),
          '8 items: sorted by sku, {"sku", "qty"} each');
SELECT is((ordertimeout._normalize_items(
              (SELECT jsonb_agg(jsonb_build_object('qty', n, 'sku', format('s%s', n)) ORDER BY format('s%s', n) DESC)
                 FROM generate_series(1, 9) AS n))).normalized,
          (SELECT jsonb_agg(jsonb_build_object('sku', format('s%s', n), 'qty', n) ORDER BY format('s%s', n))
             FROM generate_series(1, 9) AS n),
          '9 items: the same normalization the long way');
SELECT results_eq(
    $$SELECT normalized, skus, qtys FROM ordertimeout._normalize_items('[{"sku": "b", "qty": 2.0}, {"sku": "a", "qty": 3}, {"sku": "c", "qty": 1}]')$$,
    $$VALUES ('[{"sku": "a", "qty": 3}, {"sku": "b", "qty": 2}, {"sku": "c", "qty": 1}]'::jsonb, ARRAY['a', 'b', 'c'], ARRAY[3, 2, 1])$$,
    'the arrays follow the sorted items; 2.0 is the integer 2');
SELECT is((ordertimeout._normalize_items('[{"sku": "x", "qty": 1}]')).skus, ARRAY['x'],
          'one item');

-- What the short way declines, the long way refuses with its own error.
SELECT throws_ok($$SELECT ordertimeout._normalize_items('[{"sku": "a", "qty": 1}, {"sku": "b", "qty": 1}, {"sku": "a", "qty": 2}]')$$,
    'OT107', 'items lists sku "a" more than once', 'a duplicate in a short list: OT107');
SELECT throws_ok($$SELECT ordertimeout._normalize_items('[{"sku": "a", "qty": 1}, {"sku": "a", "qty": 1}, {"sku": "b", "qty": "x"}]')$$,
    'OT105', 'items[2].qty must be an integer, got "x"', 'a bad entry after a duplicate is reported first, as before');
SELECT throws_ok($$SELECT ordertimeout._normalize_items('[{"sku": "a", "qty": 1}, 7]')$$,
    'OT104', 'items[1] must be an object {"sku": ..., "qty": ...}, got a JSON number', 'a scalar entry: OT104');
SELECT throws_ok($$SELECT ordertimeout._normalize_items('[{"sku": "a", "qty": 1, "note": 1}]')$$,
    'OT104', 'items[0] has unknown key "note" (allowed: sku, qty)', 'an unknown key: OT104 naming it');
SELECT throws_ok($$SELECT ordertimeout._normalize_items('[{"sku": "a", "qty": 1e30}]')$$,
    'OT106', NULL, 'a huge qty: OT106, no integer overflow');

-- create_order reserves each SKU in sku order and reports the unknown SKU
-- before a short one, whichever comes first.
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "s1", "qty": 101}, {"sku": "zz", "qty": 1}]')$$,
    'OT108', 'items: sku "zz" is unknown', 'an unknown sku is reported before a short one');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "s2", "qty": 1}, {"sku": "s1", "qty": 101}]')$$,
    'OT109', 'items: not enough stock of sku "s1" (100 available, 101 requested)', 'short stock: OT109 naming the sku');
SELECT is((SELECT sum(reserved) FROM ordertimeout.stock), 0::numeric, 'a refused order reserves nothing');

-- The quick tests agree with the helpers that raise.
CREATE FUNCTION pg_temp.raises(sql text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
    EXECUTE sql;
    RETURN false;
EXCEPTION WHEN OTHERS THEN
    RETURN true;
END
$f$;
SELECT is_empty($$
    SELECT v FROM unnest(ARRAY[NULL, '1 s', '0', '-1 s', '1 mon', '1 year', '30 days', '30 days 00:00:01', '720 hours 1 s',
                               '1 mon -30 days', '00:00:00.000001']::interval[]) AS v
    WHERE ordertimeout._is_duration(v, interval '30 days')
       = pg_temp.raises(format('SELECT ordertimeout._check_interval(%L, %L::interval, %L, %L)', 'f', v, '30 days', 'OT113'))$$,
    '_is_duration(v, max) is true exactly when _check_interval(v, max) does not raise');
SELECT is_empty($$
    SELECT v FROM unnest(ARRAY[NULL, '0', '-1 s', '1 s']::interval[]) AS v
    WHERE ordertimeout._is_duration(v, interval '1 day', true)
       = pg_temp.raises(format('SELECT ordertimeout._check_interval(%L, %L::interval, %L, %L, true)', 'f', v, '1 day', 'OT113'))$$,
    '... and with allow_zero');
SELECT is_empty($$
    SELECT v FROM unnest(ARRAY[NULL, '', '.', '..', '...', 'a', repeat('x', 64), repeat('x', 65), E'a\u200bb', E'a\nb', 'ok-1']) AS v
    WHERE ordertimeout._is_identifier(v, 64)
       = pg_temp.raises(format('SELECT ordertimeout._check_order_id(%L)', v))$$,
    '_is_identifier(v, 64) is true exactly when _check_order_id(v) does not raise');
SELECT is((SELECT p.prolang = (SELECT l.oid FROM pg_language AS l WHERE l.lanname = 'sql') AND p.proconfig IS NULL
             FROM pg_proc AS p WHERE p.oid = 'ordertimeout._is_plain_text(text, integer)'::regprocedure),
          true, '_is_plain_text is a SQL function without SET, so the planner inlines it');

SELECT * FROM finish();
ROLLBACK;
