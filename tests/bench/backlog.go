package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// backlogPaidFraction of the backlog orders are PAID; the rest are CLOSED
// (cancelled by a timeout, then closed).
const backlogPaidFraction = 0.1

// backlogChunk is how many backlog orders one transaction writes.
const backlogChunk = 250000

// backlogSQL writes the backlog orders h<lo> ... h<hi> (of $3 in all) as one
// transaction, set-based, into the same tables and with the same values the
// API would have written over their life:
//
//   - CLOSED (90 %): create_order, a timeout cancel by sweep_due 50 ms after
//     cancel_at (release rows for both items, stock back), close_cancelled
//     12 h later: orders, order_items, releases, 3 events;
//   - PAID (10 %): create_order, begin_payment after 4 min, confirm_payment
//     after 5 min (stock sold): orders, order_items, payments, 3 events.
//
// Timer rows are gone for both (sweep_due and confirm_payment delete them).
// Creation times are spread over the 30 days before now - 1 day, oldest first.
var backlogSQL = []string{
	`CREATE TEMP TABLE backlog ON COMMIT DROP AS
	 SELECT 'h' || g.n AS order_id,
	        random() < $4 AS paid,
	        now() - interval '30 days' + (g.n::float8 / $3) * interval '29 days' AS created_at,
	        format('sku-%s', lpad(x.a::text, 3, '0')) AS sku_a,
	        format('sku-%s', lpad(((x.a + x.d) % 100)::text, 3, '0')) AS sku_b,
	        1 + floor(random() * 3)::int AS qty_a,
	        1 + floor(random() * 3)::int AS qty_b
	 FROM generate_series($1::bigint, $2::bigint) AS g(n)
	 CROSS JOIN LATERAL (SELECT floor(random() * 100)::int + 0 * g.n AS a,
	                            1 + floor(random() * 99)::int + 0 * g.n AS d) AS x`,

	`INSERT INTO ordertimeout.orders (
	     order_id, status, created_at, expire_at, cancel_at, paid_at, cancelled_at, closed_at,
	     cancel_cause, deadline_version, timer_job_id, payment_attempted, request)
	 SELECT b.order_id,
	        CASE WHEN b.paid THEN 'PAID' ELSE 'CLOSED' END,
	        b.created_at,
	        b.created_at + interval '30 minutes',
	        b.created_at + interval '30 minutes',
	        CASE WHEN b.paid THEN b.created_at + interval '5 minutes' END,
	        CASE WHEN NOT b.paid THEN b.created_at + interval '30 minutes 50 milliseconds' END,
	        CASE WHEN NOT b.paid THEN b.created_at + interval '12 hours 30 minutes' END,
	        CASE WHEN NOT b.paid THEN 'timeout' END,
	        3,
	        NULL,
	        b.paid,
	        jsonb_build_object(
	            'items', CASE WHEN b.sku_a < b.sku_b
	                          THEN jsonb_build_array(jsonb_build_object('sku', b.sku_a, 'qty', b.qty_a),
	                                                 jsonb_build_object('sku', b.sku_b, 'qty', b.qty_b))
	                          ELSE jsonb_build_array(jsonb_build_object('sku', b.sku_b, 'qty', b.qty_b),
	                                                 jsonb_build_object('sku', b.sku_a, 'qty', b.qty_a))
	                     END,
	            'timeout', extract(epoch FROM interval '30 minutes'),
	            'options', '{}'::jsonb)
	 FROM backlog AS b`,

	`INSERT INTO ordertimeout.order_items (order_id, sku, qty)
	 SELECT b.order_id, b.sku_a, b.qty_a FROM backlog AS b
	 UNION ALL
	 SELECT b.order_id, b.sku_b, b.qty_b FROM backlog AS b`,

	`INSERT INTO ordertimeout.releases (order_id, kind, resource_id, qty, cause, released_at)
	 SELECT b.order_id, 'stock', i.sku, i.qty, 'timeout', b.created_at + interval '30 minutes 50 milliseconds'
	 FROM backlog AS b
	 CROSS JOIN LATERAL (VALUES (b.sku_a, b.qty_a), (b.sku_b, b.qty_b)) AS i(sku, qty)
	 WHERE NOT b.paid`,

	`INSERT INTO ordertimeout.payments (payment_id, order_id, status, started_at, confirmed_at)
	 SELECT 'p' || b.order_id, b.order_id, 'confirmed',
	        b.created_at + interval '4 minutes', b.created_at + interval '5 minutes'
	 FROM backlog AS b
	 WHERE b.paid`,

	`INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, lateness, at, detail)
	 SELECT b.order_id, e.from_status, e.to_status, e.cause, 'bench-backlog', e.lateness, e.at, e.detail
	 FROM backlog AS b
	 CROSS JOIN LATERAL (VALUES
	     (NULL, 'PENDING', 'requested', NULL::interval, b.created_at, NULL::jsonb),
	     (CASE WHEN b.paid THEN 'PENDING' ELSE 'PENDING' END,
	      CASE WHEN b.paid THEN 'PAYING' ELSE 'CANCELLED' END,
	      CASE WHEN b.paid THEN 'payment' ELSE 'timeout' END,
	      CASE WHEN NOT b.paid THEN interval '50 milliseconds' END,
	      b.created_at + CASE WHEN b.paid THEN interval '4 minutes' ELSE interval '30 minutes 50 milliseconds' END,
	      CASE WHEN b.paid THEN jsonb_build_object('payment_id', 'p' || b.order_id,
	                                               'paying_until', b.created_at + interval '19 minutes') END),
	     (CASE WHEN b.paid THEN 'PAYING' ELSE 'CANCELLED' END,
	      CASE WHEN b.paid THEN 'PAID' ELSE 'CLOSED' END,
	      CASE WHEN b.paid THEN 'payment' ELSE 'admin' END,
	      NULL,
	      b.created_at + CASE WHEN b.paid THEN interval '5 minutes' ELSE interval '12 hours 30 minutes' END,
	      CASE WHEN b.paid THEN jsonb_build_object('payment_id', 'p' || b.order_id, 'amount', NULL) END)
	 ) AS e(from_status, to_status, cause, lateness, at, detail)
	 ORDER BY e.at`,

	`UPDATE ordertimeout.stock AS s
	 SET available = s.available - p.qty,
	     sold = s.sold + p.qty
	 FROM (SELECT i.sku, sum(i.qty) AS qty
	         FROM backlog AS b
	         CROSS JOIN LATERAL (VALUES (b.sku_a, b.qty_a), (b.sku_b, b.qty_b)) AS i(sku, qty)
	        WHERE b.paid
	        GROUP BY i.sku) AS p
	 WHERE s.sku = p.sku`,
}

// runBacklog drains the drain data set again with a backlog of closed and
// paid orders already in the tables, for each --backlog-rows size, and
// compares with the drain on empty tables measured in this invocation.
func (b *bench) runBacklog(ctx context.Context) error {
	if b.drainEmpty == nil {
		tmpl, err := b.drainTemplate(ctx)
		if err != nil {
			return err
		}
		st, err := b.drainOnce(ctx, tmpl, 1, "drain_s1")
		if err != nil {
			return err
		}
		slog.Info("backlog: drain on empty tables for comparison", "cancel_per_s", int(st.CancelPerS))
		b.drainEmpty = &st
		b.out.add(row{"drain, 1 session (for backlog)", "cancellations/s", num(st.CancelPerS), "1", "", ""})
	}
	var plot []series
	for _, rows := range b.cfg.backlogRows {
		res, batches, err := b.backlogOnce(ctx, rows)
		if err != nil {
			return err
		}
		b.out.emit(res)
		label := fmt.Sprintf("backlog, %s closed/paid orders", num(float64(rows)))
		ratio := res.RatioVsEmpty
		b.out.add(
			row{label, "cancellations/s (vs empty tables)", fmt.Sprintf("%s (%.2f×)", num(res.Median), ratio),
				fmt.Sprint(len(res.Runs)), "≥ 0.80× empty", atLeast(ratio, 0.8)},
			row{label, "time to zero (s) / batch p99 (ms)", fmt.Sprintf("%.2f / %.1f", res.TimeToZeroS, res.BatchP99Ms),
				fmt.Sprint(len(res.Runs)), fmt.Sprintf("≤ 1.25× empty (%.2f / %.1f)", b.drainEmpty.TimeToZeroS, b.drainEmpty.BatchP99Ms),
				atMost(res.TimeToZeroS, 1.25*b.drainEmpty.TimeToZeroS)},
			row{label, "database size per million orders", fmt.Sprintf("%s MB", num(res.MBPerMillion)), "1", "", ""},
		)
		plot = append(plot, batchSeries(fmt.Sprintf("%s backlog rows", num(float64(rows))), batches)...)
	}
	if b.drainEmpty != nil {
		plot = append(batchSeries("no backlog", b.drainEmpty.batches), plot...)
	}
	b.writePlot("backlog_batches.svg", plotConfig{
		title:  fmt.Sprintf("backlog: cancellations/s of each sweep_due(%d) call, %d due orders", b.cfg.batch, b.cfg.drainOrders),
		xLabel: "seconds since the canceller started",
		yLabel: "orders/s in the batch",
		series: plot,
	})
	return nil
}

// backlogOnce builds the template of one backlog size (the backlog written
// by backlogSQL first, then the due orders through create_order, then VACUUM
// ANALYZE and CHECKPOINT) and drains copies of it with one session.
func (b *bench) backlogOnce(ctx context.Context, rows int) (drainResult, []batchSample, error) {
	name, err := b.srv.clone(ctx, b.base, fmt.Sprintf("backlog_%d", rows))
	if err != nil {
		return drainResult{}, nil, err
	}
	defer b.srv.drop(name)

	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return drainResult{}, nil, err
	}
	var sizeBefore, sizeAfter int64
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&sizeBefore); err != nil {
		conn.Close(context.Background())
		return drainResult{}, nil, err
	}
	start := time.Now()
	slog.Info("writing the backlog", "rows", rows, "chunk", backlogChunk)
	for lo := 1; lo <= rows; lo += backlogChunk {
		hi := min(lo+backlogChunk-1, rows)
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for i, sql := range backlogSQL {
				var args []any
				if i == 0 {
					args = []any{lo, hi, rows, backlogPaidFraction}
				}
				if _, err := tx.Exec(ctx, sql, args...); err != nil {
					return fmt.Errorf("backlog statement %d: %w", i+1, err)
				}
			}
			return nil
		})
		if err != nil {
			conn.Close(context.Background())
			return drainResult{}, nil, err
		}
		slog.Info("backlog written", "rows", hi, "of", rows, "took", time.Since(start).Round(time.Second))
	}
	insertTook := time.Since(start)
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		conn.Close(context.Background())
		return drainResult{}, nil, err
	}
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&sizeAfter); err != nil {
		conn.Close(context.Background())
		return drainResult{}, nil, err
	}
	conn.Close(context.Background())
	if _, err := b.checkDatabase(ctx, name, name+" (backlog written)", 0); err != nil {
		return drainResult{}, nil, err
	}

	loadRate, err := b.loadDueOrders(ctx, name)
	if err != nil {
		return drainResult{}, nil, err
	}
	if err := b.srv.settle(ctx, name); err != nil {
		return drainResult{}, nil, err
	}

	var runs []drainStats
	for run := 1; run <= b.cfg.longRuns; run++ {
		st, err := b.drainOnce(ctx, name, 1, fmt.Sprintf("backlog_%d_drain", rows))
		if err != nil {
			return drainResult{}, nil, err
		}
		st.Run = run
		slog.Info("backlog drain run", "backlog_rows", rows, "run", run, "cancel_per_s", int(st.CancelPerS),
			"time_to_zero_s", st.TimeToZeroS, "invariants", st.Invariants)
		runs = append(runs, st)
	}
	res := b.drainSummary(runs, 1, "backlog", rows)
	res.DataSet = fmt.Sprintf("%d backlog orders written set-based (%.0f %% PAID, the rest CLOSED after a timeout cancel), "+
		"then the drain data set on top (create_order at %.0f orders/s with the backlog, %.0f without)",
		rows, 100*backlogPaidFraction, loadRate, b.loadRate)
	res.DataGeneratedBy = "backlog: one INSERT ... SELECT per table per 250,000 orders as superuser into orders, " +
		"order_items, releases, payments, events (and stock for the paid ones), the rows the API writes over " +
		"those orders' life; due orders: " + drainDataBy
	res.BacklogInsertS = round2(insertTook.Seconds())
	res.BytesPerOrder = round2(float64(sizeAfter-sizeBefore) / float64(rows))
	res.MBPerMillion = round2(res.BytesPerOrder * 1e6 / (1 << 20))
	if b.drainEmpty != nil && b.drainEmpty.CancelPerS > 0 {
		res.RatioVsEmpty = round2(res.Median / b.drainEmpty.CancelPerS)
	}
	return res, runs[0].batches, nil
}
