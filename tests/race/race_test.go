package race_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testTimeout bounds each test: a hang fails the test instead of the run.
const testTimeout = 2 * time.Minute

// item is one entry of create_order's items.
type item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// newOrder is the content of one create_order call.
type newOrder struct {
	ID      string
	Items   []item
	Options map[string]any // create_order's options; nil for none
}

// expiry says when the orders createOrders creates expire.
type expiry struct {
	sql string // create_order's timeout argument, with $3 bound to arg
	arg any
}

// after makes each order expire d after its creation.
func after(d time.Duration) expiry {
	return expiry{sql: "$3::bigint * interval '1 microsecond'", arg: d.Microseconds()}
}

// expireAllAt moves the deadline (expire_at and cancel_at) of every PENDING
// order, and the due time of every timer row, to one instant in from now by
// the database's clock, which it returns. Needs a superuser. Creating
// thousands of orders takes longer than a short timeout on a busy machine:
// create them with a long timeout, then make them expire together with this.
func expireAllAt(ctx context.Context, db querier, in time.Duration) (time.Time, error) {
	var deadline time.Time
	err := db.QueryRow(ctx, `
		WITH d AS (
		    SELECT clock_timestamp() + $1::bigint * interval '1 microsecond' AS at
		), orders AS (
		    UPDATE ordertimeout.orders AS o
		    SET expire_at = d.at,
		        cancel_at = d.at
		    FROM d
		    WHERE o.status = 'PENDING'
		), timers AS (
		    UPDATE public.river_job AS r
		    SET scheduled_at = d.at
		    FROM d
		    WHERE r.queue = $2
		)
		SELECT d.at FROM d`, in.Microseconds(), timer.Name).Scan(&deadline)
	if err != nil {
		return time.Time{}, fmt.Errorf("move deadlines: %w", err)
	}
	return deadline, nil
}

// createBatch is how many create_order calls createOrders sends in one batch.
const createBatch = 250

// createOrders creates orders through ordertimeout.create_order, one
// connection of its own per share, the shares at once. Each connection sends
// its share in pgx batches of createBatch calls; a batch is one transaction,
// which keeps the stock rows and points accounts it reserved from locked until
// it ends: give each share SKUs and points accounts of its own, or two batches
// lock the same rows in different orders and deadlock.
func createOrders(ctx context.Context, url string, shares [][]newOrder, exp expiry) error {
	query := fmt.Sprintf(`SELECT (ordertimeout.create_order($1, $2, %s, $4)).created`, exp.sql)
	errs := make([]error, len(shares))
	var wg sync.WaitGroup
	for w, share := range shares {
		wg.Go(func() {
			errs[w] = func() error {
				conn, err := pgx.Connect(ctx, url)
				if err != nil {
					return fmt.Errorf("connect: %w", err)
				}
				defer conn.Close(context.Background())
				for start := 0; start < len(share); start += createBatch {
					chunk := share[start:min(start+createBatch, len(share))]
					batch := &pgx.Batch{}
					for _, o := range chunk {
						options := o.Options
						if options == nil {
							options = map[string]any{}
						}
						batch.Queue(query, o.ID, o.Items, exp.arg, options)
					}
					results := conn.SendBatch(ctx, batch)
					for _, o := range chunk {
						var created bool
						if err := results.QueryRow().Scan(&created); err != nil {
							results.Close()
							return fmt.Errorf("create order %s: %w", o.ID, err)
						}
						if !created {
							results.Close()
							return fmt.Errorf("create order %s: it already existed", o.ID)
						}
					}
					if err := results.Close(); err != nil {
						return fmt.Errorf("create orders %s to %s: %w", chunk[0].ID, chunk[len(chunk)-1].ID, err)
					}
				}
				return nil
			}()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// putStock sets every SKU of totals to its total with put_stock.
func putStock(ctx context.Context, db *pgxpool.Pool, totals map[string]int64) error {
	var skus []string
	var qtys []int64
	for sku, qty := range totals {
		skus = append(skus, sku)
		qtys = append(qtys, qty)
	}
	_, err := db.Exec(ctx, `SELECT ordertimeout.put_stock(s.sku, s.qty) FROM unnest($1::text[], $2::bigint[]) AS s(sku, qty)`,
		skus, qtys)
	if err != nil {
		return fmt.Errorf("put stock: %w", err)
	}
	return nil
}

// connect opens a connection of its own to url (a session apart from any
// pool), closed when the test ends.
func connect(ctx context.Context, t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// connectN opens n connections with connect.
func connectN(ctx context.Context, t *testing.T, url string, n int) []*pgx.Conn {
	t.Helper()
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		conns[i] = connect(ctx, t, url)
	}
	return conns
}

// querier is what waitFor polls: a pool or a connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// waitFor polls cond, a query returning one boolean, until it is true or ctx
// ends.
func waitFor(ctx context.Context, db querier, cond string, args ...any) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var ok bool
		if err := db.QueryRow(ctx, cond, args...).Scan(&ok); err != nil {
			return fmt.Errorf("wait for %q: %w", cond, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %q: %w", cond, ctx.Err())
		case <-tick.C:
		}
	}
}

// sweepStats adds up the rows sweep_due returned.
type sweepStats struct {
	Calls, Claimed, Cancelled, CaughtBySweep, Checks, Moot, Deferred int
}

func (s *sweepStats) add(o sweepStats) {
	s.Calls += o.Calls
	s.Claimed += o.Claimed
	s.Cancelled += o.Cancelled
	s.CaughtBySweep += o.CaughtBySweep
	s.Checks += o.Checks
	s.Moot += o.Moot
	s.Deferred += o.Deferred
}

// sweepOnce calls sweep_due(batch) once on conn, adds its result to s and
// returns how many due timeouts it found: claimed, or deferred because
// another transaction held a lock their cancel needs.
func (s *sweepStats) sweepOnce(ctx context.Context, conn *pgx.Conn, batch int) (int, error) {
	var r sweepStats
	err := conn.QueryRow(ctx, `SELECT claimed, cancelled, caught_by_sweep, checks, moot, deferred FROM ordertimeout.sweep_due($1)`, batch).
		Scan(&r.Claimed, &r.Cancelled, &r.CaughtBySweep, &r.Checks, &r.Moot, &r.Deferred)
	if err != nil {
		return 0, fmt.Errorf("sweep_due(%d): %w", batch, err)
	}
	r.Calls = 1
	s.add(r)
	return r.Claimed + r.Deferred, nil
}

// sweepUntilEmpty calls sweep_due(batch) on conn until a call finds nothing
// due: then every due timeout is claimed, by this session or by others
// still working on theirs (SKIP LOCKED passes over those). A call that
// claims nothing but defers orders (their stock locked by another session's
// batch) is not the end: the session that holds them may have finished
// its last call already, and the deferred ones are left for the next call.
func sweepUntilEmpty(ctx context.Context, conn *pgx.Conn, batch int) (sweepStats, error) {
	var s sweepStats
	for {
		due, err := s.sweepOnce(ctx, conn, batch)
		if err != nil || due == 0 {
			return s, err
		}
	}
}

// sweepUntil calls sweep_due(batch) on conn back to back until done is
// closed and a call after that finds nothing due (claimed or deferred).
func sweepUntil(ctx context.Context, conn *pgx.Conn, batch int, done <-chan struct{}) (sweepStats, error) {
	var s sweepStats
	for {
		finished := false
		select {
		case <-done:
			finished = true
		default:
		}
		due, err := s.sweepOnce(ctx, conn, batch)
		if err != nil || (finished && due == 0) {
			return s, err
		}
	}
}

// requireNoSessionError fails the test with the first error a session
// returned, naming a deadlock (SQLSTATE 40P01) as such.
func requireNoSessionError(t *testing.T, role string, errs []error) {
	t.Helper()
	for i, err := range errs {
		if sqlstate.Code(err) == sqlstate.DeadlockDetected {
			t.Fatalf("%s %d deadlocked: %v", role, i, err)
		}
		require.NoError(t, err, "%s %d", role, i)
	}
}

// queryInt runs a query returning one integer.
func queryInt(ctx context.Context, t *testing.T, db querier, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(ctx, sql, args...).Scan(&n), sql)
	return n
}
