package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The data of docs/workload.md: 100 SKUs with 1,000,000,000 available each; every
// order has 2 items of distinct random SKUs, quantity 1 to 3 each.
const (
	skuCount     = 100
	initialStock = 1_000_000_000
)

func skuName(i int) string { return fmt.Sprintf("sku-%03d", i) }

// orderItem is one line of an order.
type orderItem struct {
	sku string
	qty int
}

// drawItems returns the two items of one random order: distinct random SKUs,
// quantity 1 to 3 each, in SKU order (the order both designs lock stock in).
func drawItems(r *rand.Rand) [2]orderItem {
	a := r.IntN(skuCount)
	b := (a + 1 + r.IntN(skuCount-1)) % skuCount
	it := [2]orderItem{{skuName(a), 1 + r.IntN(3)}, {skuName(b), 1 + r.IntN(3)}}
	if it[1].sku < it[0].sku {
		it[0], it[1] = it[1], it[0]
	}
	return it
}

// itemsJSON is the items argument of create_order for it.
func itemsJSON(it [2]orderItem) string {
	var sb strings.Builder
	for i, x := range it {
		if i == 0 {
			sb.WriteString(`[{"sku":"`)
		} else {
			sb.WriteString(`,{"sku":"`)
		}
		sb.WriteString(x.sku)
		sb.WriteString(`","qty":`)
		sb.WriteString(strconv.Itoa(x.qty))
		sb.WriteString(`}`)
	}
	sb.WriteString(`]`)
	return sb.String()
}

// items returns the items argument of create_order for one random order.
func items(r *rand.Rand) string {
	return itemsJSON(drawItems(r))
}

// newRand returns a random source for stream of the run's seed.
func (b *bench) newRand(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(b.cfg.seed), stream))
}

// prepareBase creates the template every scenario starts from: migrated,
// 100 SKUs in stock, grace 0, and the ZSet baseline's schema zset with the
// same 100 SKUs. It is not ANALYZEd: statistics of empty tables would make
// the cached plans of both designs scan tables that grow during the run.
func (b *bench) prepareBase(ctx context.Context) error {
	name := b.srv.name("base")
	if err := b.srv.create(ctx, name, ""); err != nil {
		return err
	}
	if err := b.srv.migrate(name); err != nil {
		return err
	}
	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `
		SELECT ordertimeout.put_stock(format('sku-%s', lpad(n::text, 3, '0')), $1)
		FROM generate_series(0, $2 - 1) AS n`, initialStock, skuCount)
	if err != nil {
		return fmt.Errorf("put stock: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT ordertimeout.configure(grace => interval '0')`); err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	if err := prepareZset(ctx, conn); err != nil {
		return err
	}
	b.base = name
	return nil
}

// parallel calls fn(conn, i) for every i in [0, n) from clients goroutines,
// each on its own connection to database name. It stops at the first error.
func (b *bench) parallel(ctx context.Context, name string, n, clients int, fn func(ctx context.Context, conn *pgx.Conn, r *rand.Rand, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		conn, err := b.srv.connect(ctx, name)
		if err != nil {
			cancel(err)
			break
		}
		r := b.newRand(uint64(1000 + c))
		wg.Go(func() {
			defer conn.Close(context.Background())
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, conn, r, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// drainTemplate returns the template holding the drain data set, creating
// it on first use from the base template (see loadDueOrders), then VACUUM
// ANALYZE and CHECKPOINT.
func (b *bench) drainTemplate(ctx context.Context) (string, error) {
	if b.drain != "" {
		return b.drain, nil
	}
	name, err := b.srv.clone(ctx, b.base, "drain_data")
	if err != nil {
		return "", err
	}
	rate, err := b.loadDueOrders(ctx, name)
	if err != nil {
		return "", err
	}
	b.loadRate = rate
	if err := b.srv.settle(ctx, name); err != nil {
		return "", err
	}
	b.drain = name
	return name, nil
}

// loadDueOrders creates the due orders of a drain on database name:
// --drain-orders orders d1 ... dN created through create_order with 2 random
// items and a timeout of 1 millisecond, so that with grace 0 cancel_at is
// 1 ms after created_at and every order is due when the canceller starts.
// It returns the creation rate (orders/s, from orders.created_at).
func (b *bench) loadDueOrders(ctx context.Context, name string) (float64, error) {
	n := b.cfg.drainOrders
	slog.Info("creating due orders through create_order", "database", name, "orders", n, "clients", b.cfg.loadClients)
	start := time.Now()
	err := b.parallel(ctx, name, n, b.cfg.loadClients, func(ctx context.Context, conn *pgx.Conn, r *rand.Rand, i int) error {
		_, err := conn.Exec(ctx, `SELECT FROM ordertimeout.create_order($1, $2::jsonb, interval '1 millisecond')`,
			"d"+strconv.Itoa(i+1), items(r))
		if err != nil {
			return fmt.Errorf("create order d%d: %w", i+1, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var count int64
	var first, last time.Time
	if err := conn.QueryRow(ctx, `
		SELECT count(*), min(created_at), max(created_at)
		FROM ordertimeout.orders
		WHERE order_id LIKE 'd%'`).Scan(&count, &first, &last); err != nil {
		return 0, fmt.Errorf("count due orders: %w", err)
	}
	rate := perSecond(count, first, last)
	slog.Info("due orders created", "orders", count, "took", time.Since(start).Round(time.Millisecond), "per_s", int(rate))
	return rate, nil
}

// dbNow returns the database clock.
func dbNow(ctx context.Context, q querier) (time.Time, error) {
	var t time.Time
	err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, err
}

// querier is what pgx.Conn and pgxpool.Pool have in common for reading.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// cancelRate reads, from the event log, how many orders went to CANCELLED at
// or after since, and the first and last such moment.
func cancelRate(ctx context.Context, q querier, since time.Time) (count int64, first, last time.Time, err error) {
	var f, l *time.Time
	err = q.QueryRow(ctx, `
		SELECT count(*), min(e.at), max(e.at)
		FROM ordertimeout.events AS e
		WHERE e.to_status = 'CANCELLED'
		  AND e.at >= $1`, since).Scan(&count, &f, &l)
	if err != nil {
		return 0, time.Time{}, time.Time{}, fmt.Errorf("read cancel events: %w", err)
	}
	if f != nil {
		first, last = *f, *l
	}
	return count, first, last, nil
}

// perSecond is count over the span from first to last, 0 when undefined.
func perSecond(count int64, first, last time.Time) float64 {
	span := last.Sub(first).Seconds()
	if count < 2 || span <= 0 {
		return 0
	}
	return float64(count) / span
}
