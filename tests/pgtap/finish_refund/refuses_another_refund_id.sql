-- A conflict records one refund. finish_refund again with the refund it
-- recorded is answered (refunded), as a retry; with another refund_id it is
-- refused (OT139) and writes nothing: the gateway answers one refund per
-- idempotency key (the payment id), so a second refund id means the payment
-- may have been refunded twice, and answering "refunded" as if it had been
-- recorded hid it. Before the fix the second id was answered refunded and
-- dropped.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT ordertimeout.cancel_order('o1');
SELECT ordertimeout.confirm_payment('o1', 'p1', 10);
SELECT conflict_id AS c FROM ordertimeout.conflicts \gset
SELECT ordertimeout.resolve_conflict(:c, 'refund');
SELECT is(ordertimeout.finish_refund(:c, 'R1'), 'refunded', 'finish_refund records refund R1');

SELECT test.snapshot() AS before \gset
SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, %L)', :c, 'R2'), 'OT139',
    format('conflict %s was refunded by refund "R1": refund_id "R2" is another refund of payment "p1", not recorded', :c),
    'another refund_id for a refunded conflict: OT139, naming both refunds');
SELECT is(test.snapshot(), :'before', 'and nothing is written');
SELECT is(ordertimeout.finish_refund(:c, 'R1'), 'refunded', 'the refund it recorded again: refunded, a retry');
SELECT is(test.snapshot(), :'before', 'which writes nothing either');
SELECT results_eq($$SELECT refund_id FROM ordertimeout.conflicts$$, $$VALUES ('R1')$$, 'the conflict keeps R1');

SELECT * FROM finish();
ROLLBACK;
