package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// raceResult is the JSON line of race.
type raceResult struct {
	Scenario        string           `json:"scenario"`
	Orders          int              `json:"orders"`
	Run             int              `json:"run"`
	APISpreadUs     float64          `json:"api_deadline_spread_us"`
	BeginLeadMaxMs  float64          `json:"begin_lead_max_ms"`
	ActionSpreadMs  float64          `json:"action_spread_ms"`
	Paid            int64            `json:"paid"`
	Cancelled       int64            `json:"cancelled"`
	Conflicts       int64            `json:"conflicts"`
	CancelledBy     map[string]int64 `json:"cancelled_by"`
	Status          map[string]int64 `json:"status"`
	BeginOK         int64            `json:"begin_ok"`
	BeginRefused    map[string]int64 `json:"begin_refused"`
	ConfirmPaid     int64            `json:"confirm_paid"`
	ConfirmConflict int64            `json:"confirm_conflict"`
	CancelWon       int64            `json:"cancel_order_won"`
	SweepCancelled  int64            `json:"sweep_cancelled"`
	Invariants      string           `json:"invariants"`
	Setup           string           `json:"setup"`
}

// runRace: --race-orders orders expire at the same instant T; at T each gets
// a full payment (begin_payment then confirm_payment, as a gateway whose
// buyer paid would send) and a cancel_order, concurrently, while 2 sessions
// loop sweep_due. Whatever wins, the invariants must hold.
func (b *bench) runRace(ctx context.Context) error {
	for run := 1; run <= b.cfg.longRuns; run++ {
		res, err := b.raceOnce(ctx)
		if err != nil {
			return err
		}
		res.Run = run
		b.out.emit(res)
		b.out.add(
			row{fmt.Sprintf("race, %d orders due at one instant", res.Orders), "paid / cancelled / conflict",
				fmt.Sprintf("%d / %d / %d", res.Paid, res.Cancelled, res.Conflicts), "1", "invariants hold", verdictOK(res.Invariants)},
		)
	}
	return nil
}

func verdictOK(inv string) string {
	if inv == "ok" {
		return "met"
	}
	return "VIOLATED"
}

func (b *bench) raceOnce(ctx context.Context) (raceResult, error) {
	n := b.cfg.raceOrders
	res := raceResult{
		Scenario:     "race",
		Orders:       n,
		CancelledBy:  map[string]int64{},
		Status:       map[string]int64{},
		BeginRefused: map[string]int64{},
		Setup: fmt.Sprintf("orders created through create_order(id, items, timeout => T - clock_timestamp()), "+
			"then one UPDATE as superuser sets expire_at = cancel_at = T (grace 0) and their timer rows' "+
			"scheduled_at = T, so that all are due at exactly the same instant; one goroutine per order runs "+
			"begin_payment at T minus a random 0-%s lead, then confirm_payment at once (always: the buyer paid "+
			"at the gateway), another runs cancel_order at T, on a 40-connection pool, while 2 sessions loop "+
			"sweep_due from T until it cancels nothing and the payments and cancels are done", b.cfg.raceLead),
	}
	name, err := b.srv.clone(ctx, b.base, "race")
	if err != nil {
		return res, err
	}
	defer b.srv.drop(name)
	pool, err := b.srv.pool(ctx, name, 40)
	if err != nil {
		return res, err
	}
	defer pool.Close()

	// T leaves time to create every order (at a pessimistic 500/s) first.
	now, err := dbNow(ctx, pool)
	if err != nil {
		return res, err
	}
	setup := 2*time.Second + time.Duration(n)*2*time.Millisecond
	at := now.Add(setup)
	offset := time.Since(now) // client clock minus database clock, roughly
	err = b.parallel(ctx, name, n, b.cfg.loadClients, func(ctx context.Context, conn *pgx.Conn, r *rand.Rand, i int) error {
		_, err := conn.Exec(ctx, `SELECT FROM ordertimeout.create_order($1, $2::jsonb, $3::timestamptz - clock_timestamp())`,
			"r"+strconv.Itoa(i+1), items(r), at)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("create orders: %w", err)
	}
	// The same instant for all: create_order computed each deadline from its
	// own clock_timestamp(), microseconds to milliseconds apart.
	var spread float64
	if err := pool.QueryRow(ctx, `
		SELECT extract(epoch FROM max(expire_at) - min(expire_at)) * 1e6
		FROM ordertimeout.orders`).Scan(&spread); err != nil {
		return res, err
	}
	res.APISpreadUs = round2(spread)
	if _, err := pool.Exec(ctx, `
		WITH o AS (
		    UPDATE ordertimeout.orders
		    SET expire_at = $1, cancel_at = $1
		    WHERE status = 'PENDING'
		    RETURNING timer_job_id
		)
		UPDATE public.river_job AS r
		SET scheduled_at = $1
		FROM o
		WHERE r.id = o.timer_job_id`, at); err != nil {
		return res, fmt.Errorf("align deadlines: %w", err)
	}
	lead := b.cfg.raceLead
	res.BeginLeadMaxMs = float64(lead.Microseconds()) / 1000
	wait := time.Until(at.Add(offset).Add(-lead))
	if wait <= 0 {
		return res, fmt.Errorf("creating %d orders took longer than %s: lower --race-orders", n, setup)
	}
	slog.Info("race: orders created, waiting for their deadline", "orders", n, "wait", wait.Round(time.Millisecond),
		"api_deadline_spread_us", res.APISpreadUs)
	// Warm the pool so that connecting does not spread the start.
	conns := make([]*pgxpool.Conn, 0, 40)
	for range 40 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return res, err
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	sweepConns := make([]*pgx.Conn, 2)
	for i := range sweepConns {
		c, err := b.srv.connect(ctx, name)
		if err != nil {
			return res, err
		}
		defer c.Close(context.Background())
		sweepConns[i] = c
	}
	start := time.Until(at.Add(offset).Add(-lead))
	if start <= 0 {
		return res, fmt.Errorf("setting up took longer than %s: lower --race-orders", setup)
	}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(start):
	}

	var mu sync.Mutex
	var beginOK, confirmPaid, confirmConflict, cancelWon atomic.Int64
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	r := b.newRand(4000)
	var actions sync.WaitGroup
	for i := 1; i <= n; i++ {
		id := "r" + strconv.Itoa(i)
		payAfter := lead - time.Duration(r.Float64()*float64(lead))
		actions.Go(func() {
			time.Sleep(payAfter)
			payment := "p" + id
			_, err := pool.Exec(ctx, `SELECT FROM ordertimeout.begin_payment($1, $2)`, id, payment)
			if err != nil {
				code := sqlstate.Code(err)
				if code == "" {
					fail(fmt.Errorf("begin_payment %s: %w", id, err))
					return
				}
				mu.Lock()
				res.BeginRefused[code]++
				mu.Unlock()
			} else {
				beginOK.Add(1)
			}
			var outcome string
			if err := pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2)`, id, payment).Scan(&outcome); err != nil {
				fail(fmt.Errorf("confirm_payment %s: %w", id, err))
				return
			}
			switch outcome {
			case "paid":
				confirmPaid.Add(1)
			case "conflict":
				confirmConflict.Add(1)
			}
		})
		actions.Go(func() {
			time.Sleep(lead)
			var won bool
			if err := pool.QueryRow(ctx, `SELECT ordertimeout.cancel_order($1, 'race')`, id).Scan(&won); err != nil {
				fail(fmt.Errorf("cancel_order %s: %w", id, err))
				return
			}
			if won {
				cancelWon.Add(1)
			}
		})
	}
	var sweepCancelled atomic.Int64
	done := make(chan struct{})
	var sweeps sync.WaitGroup
	for _, conn := range sweepConns {
		sweeps.Go(func() {
			time.Sleep(lead)
			for {
				var cancelled int64
				if err := conn.QueryRow(ctx, `SELECT cancelled FROM ordertimeout.sweep_due($1)`, b.cfg.batch).Scan(&cancelled); err != nil {
					fail(fmt.Errorf("sweep_due: %w", err))
					return
				}
				sweepCancelled.Add(cancelled)
				if cancelled == 0 {
					select {
					case <-done:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}
		})
	}
	actions.Wait()
	close(done)
	sweeps.Wait()
	if firstErr != nil {
		return res, firstErr
	}
	res.BeginOK = beginOK.Load()
	res.ConfirmPaid = confirmPaid.Load()
	res.ConfirmConflict = confirmConflict.Load()
	res.CancelWon = cancelWon.Load()
	res.SweepCancelled = sweepCancelled.Load()

	rows, err := pool.Query(ctx, `SELECT status, count(*) FROM ordertimeout.orders GROUP BY status`)
	if err != nil {
		return res, err
	}
	var status string
	var count int64
	if _, err := pgx.ForEachRow(rows, []any{&status, &count}, func() error { res.Status[status] = count; return nil }); err != nil {
		return res, err
	}
	rows, err = pool.Query(ctx, `SELECT cancel_cause, count(*) FROM ordertimeout.orders WHERE cancel_cause IS NOT NULL GROUP BY 1`)
	if err != nil {
		return res, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&status, &count}, func() error { res.CancelledBy[status] = count; return nil }); err != nil {
		return res, err
	}
	var spreadMs float64
	if err := pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM ordertimeout.conflicts),
		       coalesce(extract(epoch FROM max(e.at) - min(e.at)) * 1000, 0)
		FROM ordertimeout.events AS e
		WHERE e.at >= $1`, at).Scan(&res.Conflicts, &spreadMs); err != nil {
		return res, err
	}
	res.ActionSpreadMs = round2(spreadMs)
	res.Paid = res.Status["PAID"]
	res.Cancelled = res.Status["CANCELLED"]
	res.Invariants, err = b.checkDatabase(ctx, name, name+" (race)", b.cfg.maxOverdue)
	slog.Info("race", "paid", res.Paid, "cancelled", res.Cancelled, "conflicts", res.Conflicts,
		"cancelled_by", res.CancelledBy, "invariants", res.Invariants)
	return res, err
}
