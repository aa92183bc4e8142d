package fault

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/outcome"
)

// binDir holds the binaries built for this test process; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ordertimeout-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault:", err)
		os.Exit(1)
	}
	binDir = dir
	// pgtest.Main exits at once when a test failed, leaving the binaries
	// behind in the temporary directory.
	pgtest.Main(m)
	_ = os.RemoveAll(dir)
}

// build builds the binaries once per test process.
var build = sync.OnceValues(func() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return sidecarproc.Build(ctx, binDir)
})

// binary returns the ordertimeout binary (the fake gateway's is next to it).
func binary(t *testing.T) string {
	t.Helper()
	bin, err := build()
	require.NoError(t, err)
	return bin
}

// env is one test's world: a migrated database, the fake gateway process
// calling back into it, and a proxy in front of the fake that the sidecars
// talk to.
type env struct {
	t      *testing.T
	db     *pgxpool.Pool
	url    string
	bin    string
	fake   *sidecarproc.Fake
	gw     *gatewayProxy
	totals map[string]int64 // stock put per SKU, for invariant.Check
}

// stockA is the stock of the one SKU every test order buys.
const stockA = 1_000_000

// newEnv prepares db (stock for SKU "A", grace 0) and starts the fake
// gateway and its proxy; they stop when the test ends.
func newEnv(t *testing.T, db *pgxpool.Pool, url string) *env {
	t.Helper()
	e := &env{t: t, db: db, url: url, bin: binary(t), totals: map[string]int64{"A": stockA}}
	e.exec("SELECT ordertimeout.put_stock('A', $1)", stockA)
	e.exec("SELECT ordertimeout.configure(grace => interval '0')")

	out := &sidecarproc.Buffer{}
	fake, err := sidecarproc.StartFake(t.Context(), sidecarproc.FakeConfig{Bin: sidecarproc.FakeBinary(e.bin), DatabaseURL: url, Output: out})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = fake.Kill()
		if t.Failed() {
			t.Logf("output of the fake gateway:\n%s", tail(out.String(), 60))
		}
	})
	e.fake = fake
	e.gw = newGatewayProxy(t, fake.URL)
	return e
}

// newTestEnv is newEnv on a fresh database cloned from the migrated
// template (package pgtest).
func newTestEnv(t *testing.T) *env {
	t.Helper()
	db := pgtest.NewPool(t)
	return newEnv(t, db, pgtest.URL(t, db))
}

// sidecar is a sidecar process of a test with its output.
type sidecar struct {
	*sidecarproc.Sidecar
	out *sidecarproc.Buffer
}

// baseFlags are flags every test sidecar gets: quick LISTEN reconnects and
// info logs (some tests read them).
var baseFlags = []string{"--listen-reconnect", "200ms", "--log-level", "info", "--shutdown-timeout", "2s"}

// startSidecar starts a sidecar named name against the test's database,
// talking to the gateway proxy, and returns once it is ready. It is killed
// when the test ends; its output is logged if the test failed.
func (e *env) startSidecar(name string, flags ...string) *sidecar {
	e.t.Helper()
	return e.startSidecarBin(e.bin, name, nil, flags...)
}

// startSidecarBin is startSidecar with another binary and extra environment
// ("K=V").
func (e *env) startSidecarBin(bin, name string, environ []string, flags ...string) *sidecar {
	e.t.Helper()
	out := &sidecarproc.Buffer{}
	s, err := sidecarproc.StartSidecar(e.t.Context(), sidecarproc.SidecarConfig{
		Bin:         bin,
		DatabaseURL: e.url,
		GatewayURL:  e.gw.URL,
		Name:        name,
		Flags:       append(append([]string{}, baseFlags...), flags...),
		Env:         environ,
		Output:      out,
	})
	if err != nil {
		e.t.Fatalf("start sidecar %s: %v\n%s", name, err, tail(out.String(), 40))
	}
	e.t.Cleanup(func() {
		_ = s.Kill()
		if e.t.Failed() {
			e.t.Logf("output of sidecar %s:\n%s", name, tail(out.String(), 80))
		}
	})
	return &sidecar{Sidecar: s, out: out}
}

// metrics reads a sidecar's /metrics or fails the test.
func (s *sidecar) metrics(t *testing.T) sidecarproc.Metrics {
	t.Helper()
	m, err := s.Metrics(t.Context())
	require.NoError(t, err)
	return m
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	_, err := e.db.Exec(context.Background(), sql, args...)
	require.NoError(e.t, err, "exec %s", sql)
}

func (e *env) count(sql string, args ...any) int64 {
	e.t.Helper()
	var n int64
	require.NoError(e.t, e.db.QueryRow(context.Background(), sql, args...).Scan(&n), "query %s", sql)
	return n
}

func (e *env) status(orderID string) string {
	e.t.Helper()
	var s string
	require.NoError(e.t, e.db.QueryRow(context.Background(),
		"SELECT status FROM ordertimeout.order_info($1)", orderID).Scan(&s))
	return s
}

// createOrder places an order for one unit of SKU "A" due after timeout,
// with create_order's options (JSON; "" for none).
func (e *env) createOrder(orderID string, timeout time.Duration, options string) {
	e.t.Helper()
	if options == "" {
		options = "{}"
	}
	e.exec(`SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', $2 * interval '1 microsecond', $3::jsonb)`,
		orderID, timeout.Microseconds(), options)
}

// createMany places n orders prefix1..prefixN for one unit of "A" each, due
// after timeout, in chunks of 500 (one transaction each).
func (e *env) createMany(prefix string, n int, timeout time.Duration, options string) {
	e.t.Helper()
	if options == "" {
		options = "{}"
	}
	for from := 1; from <= n; from += 500 {
		e.exec(`SELECT count(ordertimeout.create_order($1 || g, '[{"sku":"A","qty":1}]',
		                   $4 * interval '1 microsecond', $5::jsonb))
		          FROM generate_series($2::int, $3::int) AS g`,
			prefix, from, min(from+499, n), timeout.Microseconds(), options)
	}
}

// beginPayment starts payment paymentID of an order with a paying window.
func (e *env) beginPayment(orderID, paymentID string, window time.Duration) {
	e.t.Helper()
	e.exec("SELECT ordertimeout.begin_payment($1, $2, $3 * interval '1 microsecond')",
		orderID, paymentID, window.Microseconds())
}

// eventually calls cond every 20 ms until it is true, failing the test if it
// is not within the deadline.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not reached within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStatus waits until an order has the given status.
func (e *env) waitStatus(orderID, status string, within time.Duration) {
	e.t.Helper()
	eventually(e.t, within, fmt.Sprintf("order %s to be %s", orderID, status), func() bool {
		return e.status(orderID) == status
	})
}

// check asserts the money-safety invariants (with the stock totals, and with
// slack when not zero) and the expected outcomes.
func (e *env) check(slack time.Duration, want outcome.Expect) {
	e.t.Helper()
	ctx := context.Background()
	rep, err := invariant.Check(ctx, e.db, invariant.Options{StockTotals: e.totals, Slack: slack})
	require.NoError(e.t, err)
	require.True(e.t, rep.OK(), "invariants:\n%s", rep)
	out, err := outcome.Check(ctx, e.db, want)
	require.NoError(e.t, err)
	require.True(e.t, out.OK(), "outcomes:\n%s", out)
}

// ids returns prefix1..prefixN.
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
