package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// The ZSet baseline's runs of steady, capacity, drain and create: the same
// workload as ordertimeout's, on a fresh copy of the same template, against
// the private redis-server (flushed before each run).

// zsetSteadyOnce is steadyOnce for the ZSet design: the producer and the
// payments go through zsetDesign on 2*--steady-conns+2 connections, like
// ordertimeout's; --zset-instances scanners run throughout.
func (b *bench) zsetSteadyOnce(ctx context.Context, p steadyParams) (steadyResult, []lagSample, error) {
	cfg := b.cfg
	res := b.newSteadyResult("zset", p)
	res.MeasuredBy = "created_per_s = count / (max - min) of zset.orders.created_at; cancel lag = cancelled_at - " +
		"expire_at of the CANCELLED orders; " + hostCPUBy
	name, err := b.srv.clone(ctx, b.base, "zset_steady")
	if err != nil {
		return res, nil, err
	}
	defer b.srv.drop(name)
	if err := b.srv.checkpoint(ctx); err != nil {
		return res, nil, err
	}
	rdb := b.redis.client(2 * cfg.steadyConns)
	defer rdb.Close()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return res, nil, fmt.Errorf("flushdb: %w", err)
	}
	pool, err := b.srv.pool(ctx, name, 2*cfg.steadyConns+2)
	if err != nil {
		return res, nil, err
	}
	defer pool.Close()

	scanners, err := b.startScanners(ctx, name)
	if err != nil {
		return res, nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			scanners.stop()
		}
	}()
	slog.Info("steady: zset scanners running, producing", "rate", p.rate, "duration", p.duration, "instances", cfg.zsetInstances)

	if err := warmPool(ctx, pool, 2*cfg.steadyConns+2); err != nil {
		return res, nil, err
	}
	if err := warmPool(ctx, scanners.pool, cfg.zsetInstances); err != nil {
		return res, nil, err
	}
	cpu := b.startCPU(b.redis.pid())
	counts, err := b.produce(ctx, &zsetDesign{pool: pool, rdb: rdb}, p)
	if err != nil {
		return res, nil, err
	}
	counts.fill(&res)
	res.OverdueAfter, err = b.afterProduce(ctx, pool, counts, p,
		`SELECT count(*) FROM zset.orders WHERE status = 'PENDING' AND expire_at < clock_timestamp()`,
		`SELECT coalesce(max(expire_at), clock_timestamp()) FROM zset.orders`)
	if err != nil {
		return res, nil, err
	}
	res.HostCPUS = round2(cpu.stop(b))
	res.OwnCPUS = round2(cpu.own())
	res.CPUWindowS = round2(cpu.wall.Seconds())
	stopped = true
	scanners.stop()
	res.Zset = scanners.countsMap()
	if scanners.first != nil {
		slog.Warn("zset steady: scanner errors", "errors", res.Zset["errors"], "first", scanners.first)
	}

	var first, last *time.Time
	if err := pool.QueryRow(ctx, `SELECT count(*), min(created_at), max(created_at) FROM zset.orders`).
		Scan(&res.Created, &first, &last); err != nil {
		return res, nil, err
	}
	if first == nil {
		return res, nil, errors.New("zset steady: no order was created")
	}
	res.CreatedPerS = round2(perSecond(res.Created, *first, *last))
	res.CPUPer1000 = perThousand(res.HostCPUS, res.Created)
	res.OwnPer1000 = perThousand(res.OwnCPUS, res.Created)
	rows, err := pool.Query(ctx, `SELECT status, count(*) FROM zset.orders GROUP BY status`)
	if err != nil {
		return res, nil, err
	}
	var status string
	var count int64
	if _, err := pgx.ForEachRow(rows, []any{&status, &count}, func() error { res.Status[status] = count; return nil }); err != nil {
		return res, nil, err
	}
	res.Paid, res.Cancelled = res.Status["PAID"], res.Status["CANCELLED"]

	rows, err = pool.Query(ctx, `
		SELECT extract(epoch FROM expire_at - $1::timestamptz)::float8,
		       (extract(epoch FROM cancelled_at - expire_at) * 1000)::float8
		FROM zset.orders
		WHERE status = 'CANCELLED'
		ORDER BY expire_at`, *first)
	if err != nil {
		return res, nil, err
	}
	var lags []lagSample
	var s lagSample
	if _, err := pgx.ForEachRow(rows, []any{&s.due, &s.lagMs}, func() error { lags = append(lags, s); return nil }); err != nil {
		return res, nil, err
	}
	res.LagMs = lagStatsOf(lags)
	res.Invariants, err = b.zsetCheck(ctx, name, name+" (zset "+res.Scenario+")", cfg.maxOverdue)
	slog.Info(res.Scenario, "design", res.Design, "rate", p.rate, "created_per_s", int(res.CreatedPerS), "lag_ms", res.LagMs,
		"paid", res.Paid, "cancelled", res.Cancelled, "own_cpu_s_per_1000", res.OwnPer1000, "invariants", res.Invariants)
	return res, lags, err
}

// left is how many of n members the scanners have not yet taken to the end
// of a cancel transaction (cancelled, or a no-op cancel).
func (s *zsetScanners) left(n int) int64 {
	return int64(n) - s.counts.cancelled.Load() - s.counts.noop.Load()
}

// countsMap is the scanners' counts for the JSON line.
func (s *zsetScanners) countsMap() map[string]int64 {
	c := &s.counts
	return map[string]int64{
		"scans": c.scans.Load(), "empty_scans": c.emptyScans.Load(), "grabbed": c.grabbed.Load(),
		"lost_zrem": c.lostRace.Load(), "cancelled": c.cancelled.Load(), "noop_cancels": c.noop.Load(),
		"errors": c.errors.Load(), "readded": c.readded.Load(),
	}
}

// zsetDrainResult is the JSON line of the ZSet drain baseline.
type zsetDrainResult struct {
	Scenario    string             `json:"scenario"`
	Orders      int                `json:"orders"`
	Instances   int                `json:"instances"`
	Limit       int                `json:"limit"`
	LoadPerS    float64            `json:"load_create_per_s"`
	CancelPerS  float64            `json:"cancel_per_s"`
	TimeToZeroS float64            `json:"time_to_zero_s"`
	Runs        []float64          `json:"runs"`
	Scanners    []map[string]int64 `json:"scanners"`
	Ours        map[string]float64 `json:"ours_cancel_per_s"`
	Ratios      map[string]float64 `json:"ratio_ours_over_zset"`
	Invariants  string             `json:"invariants"`
	MeasuredBy  string             `json:"measured_by"`
}

// runZsetDrain measures the ZSet design on its own drain data set (the same
// orders, created through its create path with a 1 ms timeout), and the
// ratios of ordertimeout's drain (ours: cancellations/s by session count).
func (b *bench) runZsetDrain(ctx context.Context, ours map[int]float64) error {
	tmpl, err := b.zsetDrainTemplate(ctx)
	if err != nil {
		return err
	}
	res := zsetDrainResult{
		Scenario:   "drain_baseline_zset",
		Orders:     b.cfg.drainOrders,
		Instances:  b.cfg.zsetInstances,
		Limit:      b.cfg.zsetBatch,
		LoadPerS:   round2(b.zsetLoad),
		Ours:       map[string]float64{},
		Ratios:     map[string]float64{},
		Invariants: "ok",
		MeasuredBy: "cancel_per_s = count / (max - min) of zset.orders.cancelled_at; time_to_zero = max(cancelled_at) " +
			"- clock_timestamp() read just before the scanners start; the sorted set is FLUSHDB'd and reloaded " +
			"(ZADD of every PENDING order at its expire_at) before each run",
	}
	var ttz []float64
	for run := 1; run <= b.cfg.longRuns; run++ {
		rate, t, counts, inv, err := b.zsetDrainOnce(ctx, tmpl)
		if err != nil {
			return err
		}
		slog.Info("zset drain run", "run", run, "cancel_per_s", int(rate), "time_to_zero_s", t, "invariants", inv)
		res.Runs = append(res.Runs, rate)
		res.Scanners = append(res.Scanners, counts)
		ttz = append(ttz, t)
		if inv != "ok" {
			res.Invariants = inv
		}
	}
	res.CancelPerS = round2(median(res.Runs))
	res.TimeToZeroS = round2(median(ttz))
	runs := fmt.Sprint(len(res.Runs))
	b.out.add(row{fmt.Sprintf("baseline: Redis ZSet (%d instances, LIMIT %d)", b.cfg.zsetInstances, b.cfg.zsetBatch),
		"cancellations/s", num(res.CancelPerS), runs, "", fmt.Sprintf("time to zero %.2f s", res.TimeToZeroS)})
	for _, sessions := range b.cfg.sessions {
		o, ok := ours[sessions]
		if !ok || res.CancelPerS <= 0 {
			continue
		}
		ratio := round2(o / res.CancelPerS)
		key := strconv.Itoa(sessions)
		res.Ours[key], res.Ratios[key] = o, ratio
		target, verdict := "", ""
		switch sessions {
		case 1:
			target, verdict = "≥ 15×", atLeast(ratio, 15)
		case 2:
			target, verdict = "≥ 25×", atLeast(ratio, 25)
		}
		b.out.add(row{fmt.Sprintf("ratio drain (%d session(s)) / ZSet", sessions), "×", fmt.Sprintf("%.1f×", ratio), "", target, verdict})
	}
	b.out.emit(res)
	return nil
}

// zsetDrainOnce drains a fresh copy of tmpl with the scanners.
func (b *bench) zsetDrainOnce(ctx context.Context, tmpl string) (float64, float64, map[string]int64, string, error) {
	name, err := b.srv.clone(ctx, tmpl, "zset_drain")
	if err != nil {
		return 0, 0, nil, "", err
	}
	defer b.srv.drop(name)
	if err := b.srv.checkpoint(ctx); err != nil {
		return 0, 0, nil, "", err
	}
	loaded, err := b.loadZset(ctx, name)
	if err != nil {
		return 0, 0, nil, "", err
	}
	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return 0, 0, nil, "", err
	}
	defer conn.Close(context.Background())
	start, err := dbNow(ctx, conn)
	if err != nil {
		return 0, 0, nil, "", err
	}
	scanners, err := b.startScanners(ctx, name)
	if err != nil {
		return 0, 0, nil, "", err
	}
	// Wait on the scanners' own counts, then check the table once: a
	// count(*) of zset.orders every 100 ms, a scan of the whole table, took
	// CPU from the scanners that ordertimeout's drain does not pay.
	waitErr := waitCondition(ctx, 10*time.Minute, func() (int64, error) { return scanners.left(loaded), nil })
	if waitErr == nil {
		waitErr = waitCondition(ctx, time.Minute, func() (int64, error) { return zsetPending(ctx, conn) })
	}
	scanners.stop()
	if waitErr != nil {
		return 0, 0, nil, "", fmt.Errorf("zset drain: %w", waitErr)
	}
	var count int64
	var first, last *time.Time
	if err := conn.QueryRow(ctx, `SELECT count(*), min(cancelled_at), max(cancelled_at) FROM zset.orders WHERE status = 'CANCELLED'`).
		Scan(&count, &first, &last); err != nil {
		return 0, 0, nil, "", err
	}
	if first == nil {
		return 0, 0, nil, "", errors.New("zset drain: nothing was cancelled")
	}
	inv, err := b.zsetCheck(ctx, name, name+" (zset drain)", b.cfg.maxOverdue)
	return round2(perSecond(count, *first, *last)), round2(last.Sub(start).Seconds()), scanners.countsMap(), inv, err
}

// zsetDrainTemplate returns the template of the ZSet drain data set:
// --drain-orders orders created through the ZSet create transaction (without
// the ZADD: each run reloads the set) with a 1 ms timeout, on
// --load-clients connections.
func (b *bench) zsetDrainTemplate(ctx context.Context) (string, error) {
	if b.zsetDrain != "" {
		return b.zsetDrain, nil
	}
	name, err := b.srv.clone(ctx, b.base, "zset_drain_data")
	if err != nil {
		return "", err
	}
	slog.Info("creating due orders through the zset create transaction", "database", name, "orders", b.cfg.drainOrders)
	err = b.parallel(ctx, name, b.cfg.drainOrders, b.cfg.loadClients, func(ctx context.Context, conn *pgx.Conn, r *rand.Rand, i int) error {
		d := &zsetDesign{pool: conn}
		_, err := d.createTx(ctx, "d"+strconv.Itoa(i+1), drawItems(r), time.Millisecond)
		return err
	})
	if err != nil {
		return "", err
	}
	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return "", err
	}
	var count int64
	var first, last time.Time
	err = conn.QueryRow(ctx, `SELECT count(*), min(created_at), max(created_at) FROM zset.orders`).Scan(&count, &first, &last)
	conn.Close(context.Background())
	if err != nil {
		return "", fmt.Errorf("count zset due orders: %w", err)
	}
	b.zsetLoad = perSecond(count, first, last)
	if err := b.srv.settle(ctx, name); err != nil {
		return "", err
	}
	b.zsetDrain = name
	return name, nil
}

// waitCondition polls count until it is 0, or fails after limit or when it
// did not change for 30 s.
func waitCondition(ctx context.Context, limit time.Duration, count func() (int64, error)) error {
	deadline := time.Now().Add(limit)
	last, lastChange := int64(-1), time.Now()
	for {
		n, err := count()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		switch {
		case time.Now().After(deadline):
			return fmt.Errorf("%d orders still PENDING after %s", n, limit)
		case time.Since(lastChange) > 30*time.Second:
			return fmt.Errorf("%d orders still PENDING, none cancelled for 30 s", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
