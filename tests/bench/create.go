package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// createTarget is docs/workload.md's goal for create with 4 clients, in orders/s.
const createTarget = 2000

// createRun is what one create run measured.
type createRun struct {
	Run        int     `json:"run"`
	Orders     int64   `json:"orders"`
	Errors     int64   `json:"errors"`
	OrdersPerS float64 `json:"orders_per_s"`
	Invariants string  `json:"invariants"`
}

// createResult is the JSON line of create.
type createResult struct {
	Scenario   string      `json:"scenario"`
	Clients    int         `json:"clients"`
	DurationS  float64     `json:"duration_s"`
	OrdersPerS float64     `json:"orders_per_s"`
	Median     float64     `json:"median"`
	Runs       []createRun `json:"runs"`
	Invariants string      `json:"invariants"`
	MeasuredBy string      `json:"measured_by"`
}

// runCreate has --create-clients clients call create_order (2 random items,
// timeout 1 hour) back to back for --create-duration, on a fresh database per
// run.
func (b *bench) runCreate(ctx context.Context) error {
	var runs []createRun
	for run := 1; run <= b.cfg.runs; run++ {
		r, err := b.createOnce(ctx)
		if err != nil {
			return err
		}
		r.Run = run
		slog.Info("create run", "run", run, "orders_per_s", int(r.OrdersPerS), "invariants", r.Invariants)
		runs = append(runs, r)
	}
	var rates []float64
	inv := "ok"
	for _, r := range runs {
		rates = append(rates, r.OrdersPerS)
		if r.Invariants != "ok" {
			inv = r.Invariants
		}
	}
	res := createResult{
		Scenario:   "create",
		Clients:    b.cfg.createClients,
		DurationS:  b.cfg.createDuration.Seconds(),
		OrdersPerS: round2(median(rates)),
		Median:     round2(median(rates)),
		Runs:       runs,
		Invariants: inv,
		MeasuredBy: "count(orders) / (max(created_at) - min(created_at))",
	}
	b.out.emit(res)
	b.out.add(row{fmt.Sprintf("create, %d clients, %s", b.cfg.createClients, b.cfg.createDuration),
		"orders created/s", num(res.Median), fmt.Sprint(len(runs)), "≥ " + num(createTarget), atLeast(res.Median, createTarget)})
	return nil
}

func (b *bench) createOnce(ctx context.Context) (createRun, error) {
	var res createRun
	name, err := b.srv.clone(ctx, b.base, "create")
	if err != nil {
		return res, err
	}
	defer b.srv.drop(name)
	if err := b.srv.checkpoint(ctx); err != nil {
		return res, err
	}

	runCtx, cancel := context.WithTimeout(ctx, b.cfg.createDuration)
	defer cancel()
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for c := range b.cfg.createClients {
		conn, err := b.srv.connect(ctx, name)
		if err != nil {
			return res, err
		}
		r := b.newRand(uint64(2000 + c))
		wg.Go(func() {
			defer conn.Close(context.Background())
			for i := 1; runCtx.Err() == nil; i++ {
				id := "c" + strconv.Itoa(c) + "-" + strconv.Itoa(i)
				_, err := conn.Exec(runCtx, `SELECT FROM ordertimeout.create_order($1, $2::jsonb, interval '1 hour')`, id, items(r))
				if err != nil && runCtx.Err() == nil {
					mu.Lock()
					res.Errors++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		slog.Warn("create_order failed", "errors", res.Errors, "first", firstErr)
	}

	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.Background())
	var first, last *time.Time
	if err := conn.QueryRow(ctx, `SELECT count(*), min(created_at), max(created_at) FROM ordertimeout.orders`).
		Scan(&res.Orders, &first, &last); err != nil {
		return res, fmt.Errorf("count orders: %w", err)
	}
	if first != nil {
		res.OrdersPerS = round2(perSecond(res.Orders, *first, *last))
	}
	res.Invariants, err = b.checkDatabase(ctx, name, name+" (create)", b.cfg.maxOverdue)
	return res, err
}
