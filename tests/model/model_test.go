package model

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/tests/internal/dbstate"
)

var (
	seedFlag     = flag.Uint64("model.seed", 0, "seed of the model test's choices (0: from the clock)")
	durationFlag = flag.Duration("model.duration", 5*time.Second, "how long the model test's sessions run")
	ordersFlag   = flag.Int("model.orders", 300, "how many orders the model test creates")
	sessionsFlag = flag.Int("model.sessions", 8, "how many sessions the model test runs at once")
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The world the orders live in: a few SKUs, some plentiful and some scarce
// (so that create_order runs out of stock, OT109), a few points accounts
// (OT112) and a few coupons shared by many orders (OT110).
var coupons = []string{"coupon-1", "coupon-2", "coupon-3", "coupon-4", "coupon-5", "coupon-6"}

// pointsFor returns the balance of each points account for a run of the
// given number of orders, in proportion, as stockFor does for stock: enough
// for many orders, too little for all that hold points at once.
func pointsFor(orders int) map[string]int64 {
	n := int64(max(orders, 300))
	return map[string]int64{
		"acct-1": n * 5 / 3,
		"acct-2": n,
		"acct-3": n * 2 / 5,
	}
}

// stockFor returns the units of each SKU for a run of the given number of
// orders: the scarce ones in proportion, so that a long run does not sell
// them out early and refuse every order naming them.
func stockFor(orders int) map[string]int64 {
	n := int64(max(orders, 300))
	return map[string]int64{
		"sku-a": 1_000_000_000,
		"sku-b": 1_000_000_000,
		"sku-c": n / 2,
		"sku-d": n * 2 / 15,
		"sku-e": n / 75,
	}
}

// TestModel runs the sessions against one database, drains it, and checks the
// database against the model and the invariants.
func TestModel(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("model: seed %d (replay the same choices: go test ./tests/model -run TestModel -model.seed=%d)", seed, seed)

	pool := pgtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), *durationFlag+3*time.Minute)
	defer cancel()
	stockTotals, pointsBalances := stockFor(*ordersFlag), pointsFor(*ordersFlag)
	setupWorld(ctx, t, pool, stockTotals, pointsBalances)

	m := newModel(seed, *ordersFlag)
	url := pgtest.URL(t, pool)

	// The sessions, each on a connection of its own.
	m.start = time.Now()
	deadline := m.start.Add(*durationFlag)
	var wg sync.WaitGroup
	errs := make([]error, *sessionsFlag)
	for i := range *sessionsFlag {
		wg.Go(func() {
			conn, err := connect(ctx, url, i)
			if err != nil {
				errs[i] = err
				return
			}
			s := &session{m: m, id: i, url: url, conn: conn, rand: rand.New(rand.NewPCG(seed, uint64(1000+i)))}
			defer s.close()
			errs[i] = s.run(ctx, deadline)
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "seed %d: session %d", seed, i)
	}
	t.Logf("model: %d calls in %v: %s", len(m.calls), time.Since(m.start).Round(time.Millisecond), m.summary())

	// Drain: the gateway answers for every payment in flight, then the sweep
	// and the gateway checks run until nothing is left to do.
	conn, err := connect(ctx, url, -1)
	require.NoError(t, err, "seed %d", seed)
	drainer := &session{m: m, id: -1, url: url, conn: conn, rand: rand.New(rand.NewPCG(seed, 999))}
	defer drainer.close()
	drainStart := time.Now()
	require.NoError(t, drainer.drain(ctx), "seed %d: drain", seed)
	t.Logf("model: drained in %v", time.Since(drainStart).Round(time.Millisecond))

	require.Empty(t, m.unexpected(), "seed %d: unexpected answers", seed)

	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: stockTotals, Slack: time.Millisecond})
	require.NoError(t, err, "seed %d", seed)
	require.True(t, report.OK(), "seed %d: invariants:\n%s", seed, report)

	state, err := dbstate.Load(ctx, pool)
	require.NoError(t, err, "seed %d", seed)
	t.Logf("model: after the drain: %s", describe(state))
	violations := state.Violations(dbstate.Expect{Points: pointsBalances})
	m.logHistories(t, state, violations)
	require.Empty(t, violations, "seed %d: invariants", seed)
	disagreements := m.verify(state)
	m.logHistories(t, state, disagreements)
	require.Empty(t, disagreements, "seed %d: the database disagrees with the model", seed)
	m.requireCoverage(t)
}

// setupWorld puts the stock and the points of the world and configures short
// deadlines: no grace, so an order is due the moment it expires.
func setupWorld(ctx context.Context, t *testing.T, pool *pgxpool.Pool, stockTotals, pointsBalances map[string]int64) {
	t.Helper()
	_, err := pool.Exec(ctx, `SELECT ordertimeout.configure(grace => interval '0', paying_window => interval '2 seconds')`)
	require.NoError(t, err)
	for _, sku := range slices.Sorted(maps.Keys(stockTotals)) {
		_, err := pool.Exec(ctx, `SELECT ordertimeout.put_stock($1, $2)`, sku, stockTotals[sku])
		require.NoError(t, err)
	}
	for _, account := range slices.Sorted(maps.Keys(pointsBalances)) {
		_, err := pool.Exec(ctx, `SELECT ordertimeout.put_points($1, $2)`, account, pointsBalances[account])
		require.NoError(t, err)
	}
}

// connect opens the connection of session id (-1: the drainer), which names
// itself as the actor of the events it causes.
func connect(ctx context.Context, url string, id int) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect session %d: %w", id, err)
	}
	if _, err := conn.Exec(ctx, `SELECT set_config('ordertimeout.actor', $1, false)`, actorOf(id)); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("name session %d: %w", id, err)
	}
	return conn, nil
}

// actorOf is the actor the events of session id carry.
func actorOf(id int) string {
	if id < 0 {
		return "model-drain"
	}
	return fmt.Sprintf("model-s%d", id)
}

// describe counts the orders of state by status.
func describe(s *dbstate.State) string {
	by := make(map[string]int)
	for _, o := range s.Orders {
		by[o.Status]++
	}
	var parts []string
	for _, status := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s %d", status, by[status]))
	}
	return fmt.Sprintf("%d orders (%s), %d events, %d conflicts, %d releases",
		len(s.Orders), strings.Join(parts, ", "), len(s.Events), len(s.Conflicts), len(s.Releases))
}

// orderRef finds the order ids named in a violation.
var orderRef = regexp.MustCompile(`order-\d{5}`)

// logHistories logs, for the first orders named in problems, every call the
// model made on them and every event the database logged for them.
func (m *model) logHistories(t *testing.T, s *dbstate.State, problems []string) {
	t.Helper()
	seen := make(map[string]bool)
	for _, p := range problems {
		for _, id := range orderRef.FindAllString(p, -1) {
			if seen[id] || len(seen) == 3 {
				continue
			}
			seen[id] = true
			var b strings.Builder
			fmt.Fprintf(&b, "seed %d: history of %s:\n", m.seed, id)
			for _, c := range m.calls {
				if c.Order == id {
					fmt.Fprintf(&b, "  call  %v\n", c)
				}
			}
			for _, e := range s.Events {
				if e.OrderID == id {
					fmt.Fprintf(&b, "  event %d %s: %s -> %s by %s (%s) %v\n", e.ID, e.At.Format("15:04:05.000000"),
						deref(e.From), e.To, e.Cause, e.Actor, e.Detail)
				}
			}
			t.Log(b.String())
		}
	}
}
