package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// naiveQueue is the River queue of the naive baseline's jobs.
const naiveQueue = "naive"

// naiveCancelArgs is the job of the naive baseline: cancel one order.
type naiveCancelArgs struct {
	OrderID string `json:"order_id"`
}

// Kind is the job kind of naiveCancelArgs.
func (naiveCancelArgs) Kind() string { return "naive_cancel" }

// naiveCancelWorker cancels one order per job through the SQL API, the way
// a "one delayed job per order" design does.
type naiveCancelWorker struct {
	river.WorkerDefaults[naiveCancelArgs]
	pool *pgxpool.Pool
}

// Work cancels the job's order.
func (w *naiveCancelWorker) Work(ctx context.Context, job *river.Job[naiveCancelArgs]) error {
	_, err := w.pool.Exec(ctx, `SELECT ordertimeout.cancel_order($1, 'naive River baseline')`, job.Args.OrderID)
	return err
}

// naiveResult is the JSON line of the naive River baseline.
type naiveResult struct {
	Scenario            string         `json:"scenario"`
	Orders              int            `json:"orders"`
	MaxWorkers          int            `json:"max_workers"`
	FetchCooldownMs     float64        `json:"fetch_cooldown_ms"`
	FetchPollIntervalMs float64        `json:"fetch_poll_interval_ms"`
	PoolConns           int            `json:"pool_conns"`
	InsertPerS          float64        `json:"insert_per_s"`
	Cancelled           int64          `json:"cancelled"`
	CancelPerS          float64        `json:"cancel_per_s"`
	TimeToZeroS         float64        `json:"time_to_zero_s"`
	JobStates           map[string]int `json:"job_states"`
	Ours                float64        `json:"ours_cancel_per_s"`
	Ratio               float64        `json:"ratio_ours_over_naive"`
	Runs                []float64      `json:"runs"`
	Invariants          string         `json:"invariants"`
	Setup               string         `json:"setup"`
}

// runNaive measures the naive design on a copy of the drain data set: one
// River job per order (InsertManyFast into a served queue) worked by a Go
// worker that calls ordertimeout.cancel_order. ours is the sweep's rate to
// compare with.
func (b *bench) runNaive(ctx context.Context, tmpl string, ours float64) error {
	var results []naiveResult
	for run := 1; run <= b.cfg.longRuns; run++ {
		res, err := b.naiveOnce(ctx, tmpl)
		if err != nil {
			return err
		}
		slog.Info("naive River run", "run", run, "cancel_per_s", int(res.CancelPerS), "invariants", res.Invariants)
		results = append(results, res)
	}
	var rates []float64
	for _, r := range results {
		rates = append(rates, r.CancelPerS)
	}
	res := results[0]
	res.Runs = rates
	res.CancelPerS = round2(median(rates))
	res.Ours = ours
	if res.CancelPerS > 0 {
		res.Ratio = round2(ours / res.CancelPerS)
	}
	for _, r := range results {
		if r.Invariants != "ok" {
			res.Invariants = r.Invariants
		}
	}
	b.out.emit(res)
	b.out.add(
		row{"baseline: naive River (1 job/order)", "cancellations/s", num(res.CancelPerS), fmt.Sprint(len(rates)), "", ""},
		row{"ratio drain (1 session) / naive River", "×", fmt.Sprintf("%.1f×", res.Ratio), "", "≥ 10×", atLeast(res.Ratio, 10)},
	)
	return nil
}

func (b *bench) naiveOnce(ctx context.Context, tmpl string) (naiveResult, error) {
	cfg := b.cfg
	res := naiveResult{
		Scenario:            "drain_baseline_naive_river",
		Orders:              cfg.drainOrders,
		MaxWorkers:          cfg.naiveWorkers,
		FetchCooldownMs:     float64(cfg.naiveFetchCooldown.Microseconds()) / 1000,
		FetchPollIntervalMs: float64(cfg.naivePollInterval.Microseconds()) / 1000,
		PoolConns:           cfg.naiveWorkers + 10,
		Setup: "same data set as drain; N jobs kind naive_cancel args {order_id} inserted with InsertManyFast " +
			"into queue naive before the client starts, then VACUUM ANALYZE + CHECKPOINT; the worker calls " +
			"ordertimeout.cancel_order(order_id) on the client's pool; rate from events.at like drain",
	}
	name, err := b.srv.clone(ctx, tmpl, "naive")
	if err != nil {
		return res, err
	}
	defer b.srv.drop(name)
	pool, err := b.srv.pool(ctx, name, res.PoolConns)
	if err != nil {
		return res, err
	}
	defer pool.Close()

	workers := river.NewWorkers()
	river.AddWorker(workers, &naiveCancelWorker{pool: pool})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{naiveQueue: {MaxWorkers: cfg.naiveWorkers}},
		Workers:           workers,
		FetchCooldown:     cfg.naiveFetchCooldown,
		FetchPollInterval: cfg.naivePollInterval,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return res, fmt.Errorf("create River client: %w", err)
	}

	insertStart := time.Now()
	const chunk = 10000
	for lo := 0; lo < cfg.drainOrders; lo += chunk {
		hi := min(lo+chunk, cfg.drainOrders)
		params := make([]river.InsertManyParams, 0, hi-lo)
		for i := lo; i < hi; i++ {
			params = append(params, river.InsertManyParams{
				Args:       naiveCancelArgs{OrderID: "d" + strconv.Itoa(i+1)},
				InsertOpts: &river.InsertOpts{Queue: naiveQueue},
			})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return res, fmt.Errorf("insert jobs: %w", err)
		}
	}
	res.InsertPerS = round2(float64(cfg.drainOrders) / time.Since(insertStart).Seconds())
	if err := b.srv.settle(ctx, name); err != nil {
		return res, err
	}

	dbStart, err := dbNow(ctx, pool)
	if err != nil {
		return res, err
	}
	if err := client.Start(ctx); err != nil {
		return res, fmt.Errorf("start River client: %w", err)
	}
	waitErr := waitNoPending(ctx, pool, 10*time.Minute)
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return res, fmt.Errorf("stop River client: %w", err)
	}
	if waitErr != nil {
		return res, waitErr
	}

	count, first, last, err := cancelRate(ctx, pool, dbStart)
	if err != nil {
		return res, err
	}
	res.Cancelled = count
	res.CancelPerS = round2(perSecond(count, first, last))
	res.TimeToZeroS = round2(last.Sub(dbStart).Seconds())
	res.JobStates = map[string]int{}
	rows, err := pool.Query(ctx, `SELECT state::text, count(*)::int FROM public.river_job WHERE queue = $1 GROUP BY 1`, naiveQueue)
	if err != nil {
		return res, fmt.Errorf("count jobs: %w", err)
	}
	var state string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error { res.JobStates[state] = n; return nil }); err != nil {
		return res, fmt.Errorf("count jobs: %w", err)
	}
	res.Invariants, err = b.checkDatabase(ctx, name, name+" (naive River)", cfg.maxOverdue)
	return res, err
}

// waitNoPending polls until no order is PENDING, or fails after limit or when
// nothing was cancelled for 30 seconds.
func waitNoPending(ctx context.Context, q querier, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, lastChange := int64(-1), time.Now()
	for {
		var pending int64
		if err := q.QueryRow(ctx, `SELECT count(*) FROM ordertimeout.orders WHERE status = 'PENDING'`).Scan(&pending); err != nil {
			return fmt.Errorf("count pending orders: %w", err)
		}
		if pending == 0 {
			return nil
		}
		if pending != last {
			last, lastChange = pending, time.Now()
		}
		switch {
		case time.Now().After(deadline):
			return fmt.Errorf("%d orders still PENDING after %s", pending, limit)
		case time.Since(lastChange) > 30*time.Second:
			return fmt.Errorf("%d orders still PENDING, none cancelled for 30 s", pending)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
