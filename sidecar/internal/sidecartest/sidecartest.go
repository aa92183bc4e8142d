package sidecartest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecar"
	"github.com/ordertimeout/ordertimeout/sidecar/metricstest"
)

// Logger returns a logger for tests: warnings and errors only, unless
// ORDERTIMEOUT_TEST_LOG=debug or info.
func Logger() *slog.Logger {
	level := slog.LevelWarn
	switch os.Getenv("ORDERTIMEOUT_TEST_LOG") {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Eventually calls cond every 20 ms until it reports true, and fails the test
// if it has not by the deadline or if it returns an error.
func Eventually(t testing.TB, within time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not reached within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Exec runs one statement or fails the test.
func Exec(t testing.TB, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

// Int runs a query returning one integer, or fails the test.
func Int(t testing.TB, db *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	return n
}

// Status returns an order's status.
func Status(t testing.TB, db *pgxpool.Pool, orderID string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), "SELECT status FROM ordertimeout.order_info($1)", orderID).Scan(&s); err != nil {
		t.Fatalf("read status of order %q: %v", orderID, err)
	}
	return s
}

// WaitStatus waits until an order has the given status.
func WaitStatus(t testing.TB, db *pgxpool.Pool, orderID, status string, within time.Duration) {
	t.Helper()
	Eventually(t, within, fmt.Sprintf("order %s to be %s", orderID, status), func() (bool, error) {
		var s string
		err := db.QueryRow(context.Background(), "SELECT status FROM ordertimeout.order_info($1)", orderID).Scan(&s)
		return s == status, err
	})
}

// Setup prepares a test database: stock for sku "A" and a zero grace, so
// that an order is due when its timeout passes.
func Setup(t testing.TB, db *pgxpool.Pool) {
	t.Helper()
	Exec(t, db, "SELECT ordertimeout.put_stock('A', 1000000)")
	Exec(t, db, "SELECT ordertimeout.configure(grace => interval '0')")
}

// CreateOrder places an order for one unit of sku "A".
func CreateOrder(t testing.TB, db *pgxpool.Pool, orderID string, timeout time.Duration, options string) {
	t.Helper()
	if options == "" {
		options = "{}"
	}
	Exec(t, db, `SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', $2 * interval '1 microsecond', $3::jsonb)`,
		orderID, timeout.Microseconds(), options)
}

// Fake starts a fake gateway calling back into db (nil: no callbacks) and
// returns it with its URL. Both stop when the test ends.
func Fake(t testing.TB, db *pgxpool.Pool) (*fakegateway.Server, string) {
	t.Helper()
	fake := fakegateway.New(db, Logger())
	srv := httptest.NewServer(fake)
	t.Cleanup(func() {
		srv.Close()
		fake.Close()
	})
	return fake, srv.URL
}

// Config returns a sidecar configuration for tests: fast polling, short
// sleeps and reconnects, no HTTP server.
func Config(databaseURL, gatewayURL, name string) sidecar.Config {
	return sidecar.Config{
		DatabaseURL:       databaseURL,
		Name:              name,
		GatewayURL:        gatewayURL,
		GatewayTimeout:    2 * time.Second,
		MaxSleep:          200 * time.Millisecond,
		ListenReconnect:   200 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		MaxWorkers:        10,
		HTTPAddr:          "-",
		ShutdownTimeout:   5 * time.Second,
		Logger:            Logger(),
	}
}

// Start runs a sidecar until the test ends (or stop is called) and returns
// it once it is ready.
func Start(t testing.TB, cfg sidecar.Config) (s *sidecar.Sidecar, stop func()) {
	t.Helper()
	ss, stops := StartMany(t, cfg)
	return ss[0], stops[0]
}

// StartMany builds every sidecar first, then starts them all at once, and
// returns them once all are ready. Each runs until the test ends or its stop
// is called.
func StartMany(t testing.TB, cfgs ...sidecar.Config) ([]*sidecar.Sidecar, []func()) {
	t.Helper()
	ctx := context.Background()
	var (
		sidecars []*sidecar.Sidecar
		stops    []func()
		dones    []chan error
	)
	for _, cfg := range cfgs {
		s, err := sidecar.New(ctx, cfg)
		if err != nil {
			t.Fatalf("new sidecar %s: %v", cfg.Name, err)
		}
		sidecars = append(sidecars, s)
	}
	for i, s := range sidecars {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(runCtx) }()
		dones = append(dones, done)
		name := cfgs[i].Name
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("sidecar %s: %v", name, err)
					}
				case <-time.After(30 * time.Second):
					t.Errorf("sidecar %s did not stop within 30s", name)
				}
			})
		}
		stops = append(stops, stop)
		t.Cleanup(stop)
	}
	for i, s := range sidecars {
		Eventually(t, 10*time.Second, "sidecar "+cfgs[i].Name+" to be ready", func() (bool, error) {
			if len(dones[i]) > 0 {
				return false, fmt.Errorf("sidecar %s stopped", cfgs[i].Name)
			}
			return s.Ready(ctx) == nil, nil
		})
	}
	return sidecars, stops
}

// CreateMany places n orders named prefix1..prefixN, each for one unit of
// one of skus SKUs "S0".."S<skus-1>" (given enough stock here), due after
// timeout. It commits in chunks of 1000 from two sessions at once: one huge
// transaction updating the same stock rows again and again is far slower.
func CreateMany(t testing.TB, db *pgxpool.Pool, prefix string, n, skus int, timeout time.Duration) {
	t.Helper()
	Exec(t, db, "SELECT ordertimeout.put_stock('S' || g, $1) FROM generate_series(0, $2 - 1) AS g", n, skus)
	const chunk = 1000
	var wg sync.WaitGroup
	errs := make(chan error, n/chunk+1)
	next := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := range next {
				_, err := db.Exec(context.Background(), `
					SELECT count(ordertimeout.create_order($1 || g,
					           jsonb_build_array(jsonb_build_object('sku', 'S' || (g % $4), 'qty', 1)),
					           $5 * interval '1 microsecond'))
					  FROM generate_series($2::int, $3::int) AS g`,
					prefix, from, min(from+chunk-1, n), skus, timeout.Microseconds())
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for from := 1; from <= n; from += chunk {
		next <- from
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create orders: %v", err)
	}
}

// Metric returns the sum of the samples of metric family name in g whose
// labels include the pairs of labels (name, value, ...), 0 when there is
// none (see metricstest.Sum).
func Metric(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, _, err := metricstest.Sum(g, name, labels...)
	require.NoError(t, err)
	return v
}

// WarnOnPlpgsqlLoad sets a misspelt plpgsql setting on the database of url,
// from a connection that has not loaded plpgsql (one that has refuses it):
// every later session gets a WARNING about it when plpgsql loads, a warning
// that has nothing to do with what the session calls.
func WarnOnPlpgsqlLoad(t testing.TB, url string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background()) //nolint:errcheck // the test goes on without it
	_, err = conn.Exec(context.Background(), "ALTER DATABASE "+pgx.Identifier{conn.Config().Database}.Sanitize()+
		" SET plpgsql.variable_conflit = 'error'")
	require.NoError(t, err)
}
