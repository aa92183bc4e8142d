-- Statistics that say "empty" (pg_class.reltuples = 0), left by 000020's
-- ANALYZE of orders, payments, events and stock on a fresh install, are
-- forgotten: an empty table is truncated, which sets reltuples back to -1
-- ("never analyzed"), together with the tables whose foreign keys reference
-- it (empty too, then); one that has rows is analyzed. The lock comes before
-- the check that the group is empty, so no row committed in between can be
-- lost. A group whose analyzed tables have real statistics is neither locked
-- nor touched.
DO $forget$
DECLARE
    v_analyzed regclass[] := ARRAY['ordertimeout.orders', 'ordertimeout.payments',
                                   'ordertimeout.events', 'ordertimeout.stock']::regclass[];
    v_group    regclass[];
    v_list     text;
    v_empty    boolean;
BEGIN
    FOREACH v_group SLICE 1 IN ARRAY ARRAY[
        ARRAY['ordertimeout.orders', 'ordertimeout.order_items', 'ordertimeout.payments', 'ordertimeout.conflicts'],
        ARRAY['ordertimeout.events', NULL, NULL, NULL],
        ARRAY['ordertimeout.stock', NULL, NULL, NULL]]::regclass[] LOOP
        v_group := array_remove(v_group, NULL);
        IF NOT EXISTS (SELECT 1 FROM pg_class AS c
                        WHERE c.oid = ANY (v_group) AND c.oid = ANY (v_analyzed) AND c.reltuples = 0) THEN
            CONTINUE;
        END IF;
        v_list := (SELECT string_agg(g::text, ', ') FROM unnest(v_group) AS g);
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_list);
        EXECUTE 'SELECT ' || (SELECT string_agg(format('NOT EXISTS (SELECT 1 FROM %s)', g), ' AND ')
                                FROM unnest(v_group) AS g)
        INTO v_empty;
        IF v_empty THEN
            EXECUTE format('TRUNCATE %s', v_list);
        ELSE
            FOR i IN 1 .. cardinality(v_group) LOOP
                IF v_group[i] = ANY (v_analyzed)
                   AND (SELECT c.reltuples = 0 FROM pg_class AS c WHERE c.oid = v_group[i]) THEN
                    EXECUTE format('ANALYZE %s', v_group[i]);
                END IF;
            END LOOP;
        END IF;
    END LOOP;
END
$forget$;
