package sidecar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/migrator"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecar"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
	"github.com/ordertimeout/ordertimeout/sidecar/metricstest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

// env is one test's database, fake gateway and sidecar configuration.
type env struct {
	db   *pgxpool.Pool
	url  string
	fake *fakegateway.Server
	gw   string
}

// newEnv prepares a database with stock and zero grace, and a fake gateway;
// callbacks says whether the fake calls back into the database.
func newEnv(t *testing.T, callbacks bool) *env {
	t.Helper()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	var cb *pgxpool.Pool
	if callbacks {
		cb = db
	}
	fake, gw := sidecartest.Fake(t, cb)
	return &env{db: db, url: pgtest.URL(t, db), fake: fake, gw: gw}
}

func (e *env) config(name string) sidecar.Config {
	return sidecartest.Config(e.url, e.gw, name)
}

func (e *env) pay(t *testing.T, orderID, behaviour, paymentID string) {
	t.Helper()
	require.NoError(t, e.fake.Set(bg, orderID, fakegateway.Behaviour{Behaviour: behaviour, PaymentID: paymentID}))
}

// createAndBegin places an order for one unit of sku "A" with timeout and
// begins its payment paymentID with a window of 100 ms, in one statement: a
// begin_payment of its own could come after a short timeout on a busy
// machine (OT122, the order expired; CI once saw it 300 ms after the create).
func createAndBegin(t *testing.T, db *pgxpool.Pool, orderID string, timeout time.Duration, options, paymentID string) {
	t.Helper()
	if options == "" {
		options = "{}"
	}
	sidecartest.Exec(t, db, `SELECT ordertimeout.begin_payment($1, $4, interval '100 milliseconds')
		FROM ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', $2 * interval '1 microsecond', $3::jsonb)`,
		orderID, timeout.Microseconds(), options, paymentID)
}

// events returns the order's history as "FROM>TO cause" strings.
func events(t *testing.T, db *pgxpool.Pool, orderID string) []string {
	t.Helper()
	rows, err := db.Query(bg, "SELECT coalesce(from_status, '-') || '>' || to_status || ' ' || cause FROM ordertimeout.order_events($1)", orderID)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// A buyer paid at the gateway, which never called back (silent). Under the
// attempted policy (a payment was started, then failed, then the buyer paid
// with another one) and under the always policy (no payment started at all),
// the precancel check finds the payment: the order ends PAID, never
// CANCELLED. The gateway being down for a while changes nothing.
func TestPaidAtGatewayIsNeverCancelled(t *testing.T) {
	t.Parallel()

	t.Run("attempted", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, false)
		// A short window: the order is never cancelled before the
		// gateway's expiry plus grace, even after a failed payment.
		createAndBegin(t, e.db, "A1", time.Second, "", "P1")
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.fail_payment('A1', 'P1')")
		e.pay(t, "A1", fakegateway.Silent, "P2")
		sidecartest.Start(t, e.config("s1"))

		sidecartest.WaitStatus(t, e.db, "A1", "PAID", 15*time.Second)
		require.Equal(t, []string{"->PENDING requested", "PENDING>PAYING payment", "PAYING>PENDING payment", "PENDING>PAID payment"},
			events(t, e.db, "A1"))
		require.EqualValues(t, 1, sidecartest.Int(t, e.db,
			"SELECT count(*) FROM ordertimeout.order_payments('A1') WHERE payment_id = 'P2' AND status = 'confirmed'"))
		sidecartest.Eventually(t, 10*time.Second, "the precancel check completed", func() (bool, error) {
			return sidecartest.Int(t, e.db,
				"SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_precancel_check' AND state = 'completed'") == 1, nil
		})
	})

	t.Run("always, gateway down at first", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, false)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
		sidecartest.CreateOrder(t, e.db, "A1", 300*time.Millisecond, "")
		e.pay(t, "A1", fakegateway.Silent, "P1")
		require.NoError(t, e.fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Down}))
		sidecartest.Start(t, e.config("s1"))

		// The check asks, the gateway is down, the check snoozes.
		sidecartest.Eventually(t, 15*time.Second, "the check to meet the down gateway", func() (bool, error) {
			return e.fake.Stats().Queries > 0, nil
		})
		sidecartest.Eventually(t, 15*time.Second, "the check to snooze", func() (bool, error) {
			return sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job
			   WHERE kind = 'ordertimeout_precancel_check' AND (metadata->>'snoozes')::int >= 1`) == 1, nil
		})
		require.Equal(t, "PENDING", sidecartest.Status(t, e.db, "A1"))
		require.NoError(t, e.fake.SetGateway(fakegateway.Behaviour{Behaviour: fakegateway.Normal}))

		sidecartest.WaitStatus(t, e.db, "A1", "PAID", 20*time.Second)
		require.Equal(t, []string{"->PENDING requested", "PENDING>PAID payment"}, events(t, e.db, "A1"))
	})

	t.Run("paying, silent", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, false)
		sidecartest.CreateOrder(t, e.db, "A1", time.Minute, "")
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment('A1', 'P1', interval '300 milliseconds')")
		e.pay(t, "A1", fakegateway.Silent, "P1")
		sidecartest.Start(t, e.config("s1"))

		sidecartest.WaitStatus(t, e.db, "A1", "PAID", 15*time.Second)
		require.Equal(t, []string{"->PENDING requested", "PENDING>PAYING payment", "PAYING>PAID payment"}, events(t, e.db, "A1"))
	})
}

// A PAYING order whose payment the gateway says failed returns to PENDING
// (payment check), and its own timeout then cancels it after a precancel
// check; the payment is then closed at the gateway.
func TestFailedPaymentReturnsToPendingThenCancels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false) // no callbacks: only the sidecar's check learns of the failure
	sidecartest.CreateOrder(t, e.db, "A1", 2*time.Second, "")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment('A1', 'P1', interval '200 milliseconds')")
	e.pay(t, "A1", fakegateway.Decline, "P1")
	sidecartest.Start(t, e.config("s1"))

	sidecartest.WaitStatus(t, e.db, "A1", "CANCELLED", 20*time.Second)
	require.Equal(t, []string{
		"->PENDING requested",
		"PENDING>PAYING payment",
		"PAYING>PENDING payment",
		"PENDING>CANCELLED timeout",
	}, events(t, e.db, "A1"))
	require.EqualValues(t, 1, sidecartest.Int(t, e.db,
		"SELECT count(*) FROM ordertimeout.order_payments('A1') WHERE payment_id = 'P1' AND status = 'failed'"))
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.releases WHERE order_id = 'A1'"))
	sidecartest.Eventually(t, 10*time.Second, "the payment closed at the gateway", func() (bool, error) {
		return e.fake.Order("A1").Closes == 1, nil
	})
}

// lateConflict cancels order orderID by timeout, then lets the buyer pay it
// at the gateway (a late payment); it returns once the conflict is recorded.
func lateConflict(t *testing.T, e *env, orderID, paymentID string) {
	t.Helper()
	sidecartest.WaitStatus(t, e.db, orderID, "CANCELLED", 15*time.Second)
	require.NoError(t, e.fake.Set(bg, orderID, fakegateway.Behaviour{Behaviour: fakegateway.Late, DelayMS: 50, PaymentID: paymentID}))
	sidecartest.Eventually(t, 10*time.Second, "the late payment's conflict", func() (bool, error) {
		return sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = $1", orderID) == 1, nil
	})
}

// A late payment is resolved exactly once: reinstated when the stock is
// still there, refunded (exactly one refund at the gateway) when not, also
// when the NOTIFY is repeated.
func TestLatePaymentResolvedOnce(t *testing.T) {
	t.Parallel()

	t.Run("reinstated", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, true)
		sidecartest.CreateOrder(t, e.db, "A1", 200*time.Millisecond, "")
		s, _ := sidecartest.Start(t, e.config("s1"))
		lateConflict(t, e, "A1", "P1")

		sidecartest.WaitStatus(t, e.db, "A1", "PAID", 15*time.Second)
		require.EqualValues(t, 1, sidecartest.Int(t, e.db,
			"SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'A1' AND resolution = 'reinstated' AND resolved_by = 'sidecar:s1'"))
		require.Equal(t, 0, e.fake.Stats().Refunds)
		require.GreaterOrEqual(t, s.Listener().Stats().Notifications, int64(1))
		var avail, reserved, sold int64
		require.NoError(t, e.db.QueryRow(bg, "SELECT available, reserved, sold FROM ordertimeout.stock WHERE sku = 'A'").Scan(&avail, &reserved, &sold))
		require.Equal(t, []int64{999999, 0, 1}, []int64{avail, reserved, sold})
	})

	t.Run("refunded when the stock is gone", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, true)
		sidecartest.CreateOrder(t, e.db, "A1", 200*time.Millisecond, "")
		s, _ := sidecartest.Start(t, e.config("s1"))
		sidecartest.WaitStatus(t, e.db, "A1", "CANCELLED", 15*time.Second)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.put_stock('A', 0)")
		lateConflict(t, e, "A1", "P1")

		sidecartest.Eventually(t, 15*time.Second, "the conflict refunded", func() (bool, error) {
			return sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'A1' AND resolution = 'refunded'") == 1, nil
		})
		require.Equal(t, "CANCELLED", sidecartest.Status(t, e.db, "A1"))
		require.Equal(t, 1, e.fake.Stats().Refunds)
		require.Equal(t, 1, e.fake.Order("A1").Refunds)

		// More NOTIFYs (one per transaction: PostgreSQL folds identical
		// ones), with the conflict's id or anything else as payload, change
		// nothing: a NOTIFY only wakes the listener up.
		before := s.Listener().Stats()
		for _, payload := range []string{"", "1", "999999", "nope"} {
			sidecartest.Exec(t, e.db, "SELECT pg_notify('ordertimeout_conflict', $1)", payload)
		}
		sidecartest.Eventually(t, 10*time.Second, "the NOTIFYs handled and a scan after them", func() (bool, error) {
			st := s.Listener().Stats()
			return st.Notifications >= before.Notifications+4 && st.Scans > before.Scans, nil
		})
		sidecartest.Eventually(t, 10*time.Second, "no resolve job left to run", func() (bool, error) {
			return sidecartest.Int(t, e.db, "SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_resolve_conflict' AND state NOT IN ('completed')") == 0, nil
		})
		require.Equal(t, 1, e.fake.Stats().Refunds)
		require.Equal(t, 1, e.fake.Stats().RefundRequests)
		require.EqualValues(t, 2, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.events WHERE order_id = 'A1' AND cause = 'conflict'"),
			"one event when the refund was claimed, one when it was recorded")
	})

	t.Run("found by the gateway close", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, false) // a silent payment: only the close finds it
		// A short window: the order is never cancelled before the
		// gateway's expiry plus grace, even after a failed payment.
		createAndBegin(t, e.db, "A1", time.Second, `{"precheck": "never"}`, "P1")
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.fail_payment('A1', 'P1')")
		e.pay(t, "A1", fakegateway.Silent, "P2")
		sidecartest.Start(t, e.config("s1"))

		sidecartest.Eventually(t, 15*time.Second, "the late payment reinstated", func() (bool, error) {
			return sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
			   WHERE order_id = 'A1' AND payment_id = 'P2' AND resolution = 'reinstated'`) == 1, nil
		})
		require.Equal(t, "PAID", sidecartest.Status(t, e.db, "A1"))
		require.Equal(t, 1, e.fake.Order("A1").Closes)
		require.Zero(t, e.fake.Stats().Refunds)
	})

	t.Run("wrong amount found by the precancel check", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, false)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
		sidecartest.CreateOrder(t, e.db, "A1", 200*time.Millisecond, `{"amount": 10}`)
		require.NoError(t, e.fake.Set(bg, "A1", fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "P1", Amount: "12"}))
		sidecartest.Start(t, e.config("s1"))

		sidecartest.WaitStatus(t, e.db, "A1", "CANCELLED", 15*time.Second)
		sidecartest.Eventually(t, 15*time.Second, "the conflict refunded", func() (bool, error) {
			return sidecartest.Int(t, e.db, `SELECT count(*) FROM ordertimeout.conflicts
			   WHERE order_id = 'A1' AND kind = 'amount_mismatch' AND resolution = 'refunded'`) == 1, nil
		})
		require.Equal(t, 1, e.fake.Stats().Refunds)
	})

	t.Run("manual policy leaves the conflict open", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, true)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(late_payment => 'manual')")
		sidecartest.CreateOrder(t, e.db, "A1", 200*time.Millisecond, "")
		s, _ := sidecartest.Start(t, e.config("s1"))
		before := s.Listener().Stats().Scans
		lateConflict(t, e, "A1", "P1")

		// The wake-up is heard and the table scanned, but an open conflict
		// under the manual policy makes no job.
		sidecartest.Eventually(t, 15*time.Second, "a scan after the late payment", func() (bool, error) {
			st := s.Listener().Stats()
			return st.Notifications >= 1 && st.Scans > before, nil
		})
		require.EqualValues(t, 0, sidecartest.Int(t, e.db, "SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_resolve_conflict'"))
		require.EqualValues(t, 1, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.open_conflicts(10)"))
		require.Equal(t, "CANCELLED", sidecartest.Status(t, e.db, "A1"))
		require.Zero(t, e.fake.Stats().Refunds)

		// A person decides to refund: the claim wakes the sidecar, which
		// makes the refund and records it.
		var claimed string
		require.NoError(t, e.db.QueryRow(bg, `SELECT ordertimeout.resolve_conflict(conflict_id, 'refund') FROM ordertimeout.conflicts WHERE order_id = 'A1'`).Scan(&claimed))
		require.Equal(t, "refunding", claimed)
		sidecartest.Eventually(t, 15*time.Second, "the claimed refund made", func() (bool, error) {
			return sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'A1' AND resolution = 'refunded'") == 1, nil
		})
		require.Equal(t, 1, e.fake.Stats().Refunds)
	})

	t.Run("NOTIFY missed while LISTEN was down", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, true)
		sidecartest.CreateOrder(t, e.db, "A1", 200*time.Millisecond, "")
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.put_stock('B', 1)")
		sidecartest.Exec(t, e.db, `SELECT ordertimeout.create_order('B1', '[{"sku":"B","qty":1}]', interval '200 milliseconds')`)
		cfg := e.config("s1")
		cfg.ListenReconnect = 3 * time.Second // the window in which the NOTIFY goes unheard
		s, _ := sidecartest.Start(t, cfg)
		sidecartest.WaitStatus(t, e.db, "A1", "CANCELLED", 15*time.Second)
		sidecartest.WaitStatus(t, e.db, "B1", "CANCELLED", 15*time.Second)
		sidecartest.Exec(t, e.db, "SELECT ordertimeout.put_stock('B', 0)") // B1 cannot be reinstated, A1 can

		listenerPID := func() int64 {
			return sidecartest.Int(t, e.db, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			   WHERE datname = current_database() AND application_name = $1`, sidecar.ListenerName)
		}
		sidecartest.Eventually(t, 10*time.Second, "the listener", func() (bool, error) { return listenerPID() != 0, nil })
		require.EqualValues(t, 1, s.Listener().Stats().Connects)
		sidecartest.Exec(t, e.db, "SELECT pg_terminate_backend($1)", listenerPID())
		sidecartest.Eventually(t, 5*time.Second, "the listener gone", func() (bool, error) { return listenerPID() == 0, nil })

		// The late payments arrive while nobody listens.
		e.pay(t, "A1", fakegateway.Instant, "PA")
		e.pay(t, "B1", fakegateway.Instant, "PB")
		require.EqualValues(t, 2, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts WHERE resolution IS NULL"))
		require.EqualValues(t, 1, s.Listener().Stats().Connects, "the listener must still be down")

		sidecartest.Eventually(t, 20*time.Second, "both conflicts resolved", func() (bool, error) {
			return sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts WHERE resolution IS NOT NULL") == 2, nil
		})
		// Both were queued by the scan after the reconnect; the only
		// notification is the wake-up of B1's refund claim.
		require.LessOrEqual(t, s.Listener().Stats().Notifications, int64(1), "resolved from the backlog")
		require.EqualValues(t, 2, s.Listener().Stats().Connects)
		require.Equal(t, "PAID", sidecartest.Status(t, e.db, "A1"))
		require.Equal(t, "CANCELLED", sidecartest.Status(t, e.db, "B1"))
		require.Equal(t, 1, e.fake.Stats().Refunds)
		require.Equal(t, 1, e.fake.Order("B1").Refunds)
	})
}

// One connection LISTENs for the sidecar on both channels: a NOTIFY on
// ordertimeout_wake reaches the sweep and one on ordertimeout_conflict the
// conflict scan, before and after that connection is cut.
func TestOneListenConnectionServesBothChannels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	cfg := e.config("s1")
	cfg.ListenReconnect = 100 * time.Millisecond
	s, _ := sidecartest.Start(t, cfg)

	listenerPID := func() int64 {
		return sidecartest.Int(t, e.db, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		   WHERE datname = current_database() AND application_name = $1`, sidecar.ListenerName)
	}
	// Every connection the sidecar opens outside its pool is named
	// ordertimeout-listen...: one of them.
	listeners := func() int64 {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM pg_stat_activity
		   WHERE datname = current_database() AND application_name LIKE 'ordertimeout-listen%'`)
	}
	bothHeard := func(what string) {
		t.Helper()
		// Sent again at every poll: the connection counts as up once it
		// LISTENs on one channel, and a NOTIFY before the LISTEN on the
		// other is not delivered.
		wakeups, notifications := s.Sweeper().Stats().Wakeups, s.Listener().Stats().Notifications
		sidecartest.Eventually(t, 10*time.Second, what, func() (bool, error) {
			sidecartest.Exec(t, e.db, "SELECT pg_notify('ordertimeout_wake', '')")
			sidecartest.Exec(t, e.db, "SELECT pg_notify('ordertimeout_conflict', '')")
			return s.Sweeper().Stats().Wakeups > wakeups && s.Listener().Stats().Notifications > notifications, nil
		})
	}

	sidecartest.Eventually(t, 10*time.Second, "the listener", func() (bool, error) {
		return s.Listener().Stats().Connects == 1 && listenerPID() != 0, nil
	})
	require.EqualValues(t, 1, listeners())
	bothHeard("both NOTIFYs heard on the one connection")

	first := listenerPID()
	sidecartest.Exec(t, e.db, "SELECT pg_terminate_backend($1)", first)
	sidecartest.Eventually(t, 10*time.Second, "the listener back on a new connection", func() (bool, error) {
		pid := listenerPID()
		return pid != 0 && pid != first && s.Listener().Stats().Connects == 2, nil
	})
	require.EqualValues(t, 1, listeners())
	bothHeard("both NOTIFYs heard after the reconnect")
}

// Two sidecars with their own pools drain 20,000 due orders: every order is
// cancelled exactly once, every reservation released once, and both did part
// of the work.
func TestTwoSidecarsDrainTogether(t *testing.T) {
	t.Parallel()
	const orders = 20000
	e := newEnv(t, false)
	sidecartest.CreateMany(t, e.db, "o", orders, 20, time.Second)
	sidecartest.Eventually(t, time.Minute, "every order due", func() (bool, error) {
		return sidecartest.Int(t, e.db, "SELECT due_timers FROM ordertimeout.sweep_stats") == orders, nil
	})

	var cfgs []sidecar.Config
	for _, name := range []string{"s1", "s2"} {
		cfg := e.config(name)
		cfg.SweepBatch = 250
		cfg.SweepSessions = 2
		cfgs = append(cfgs, cfg)
	}
	start := time.Now()
	sidecartest.StartMany(t, cfgs...)
	sidecartest.Eventually(t, 2*time.Minute, "every order cancelled", func() (bool, error) {
		return sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED'") == orders, nil
	})
	t.Logf("drained %d orders in %s", orders, time.Since(start).Round(time.Millisecond))
	require.EqualValues(t, orders, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.events WHERE to_status = 'CANCELLED'"))
	require.EqualValues(t, 0, sidecartest.Int(t, e.db, `SELECT count(*) FROM (SELECT order_id FROM ordertimeout.events
	   WHERE to_status = 'CANCELLED' GROUP BY order_id HAVING count(*) > 1) AS twice`))
	require.EqualValues(t, orders, sidecartest.Int(t, e.db, "SELECT count(DISTINCT order_id) FROM ordertimeout.releases"))
	require.EqualValues(t, orders, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.releases"))
	var avail, reserved int64
	require.NoError(t, e.db.QueryRow(bg, "SELECT sum(available), sum(reserved) FROM ordertimeout.stock WHERE sku LIKE 'S%'").Scan(&avail, &reserved))
	require.EqualValues(t, 20*orders, avail, "stock back where it was")
	require.Zero(t, reserved)

	rows, err := e.db.Query(bg, `SELECT actor, count(*) FROM ordertimeout.events WHERE to_status = 'CANCELLED' GROUP BY actor ORDER BY actor`)
	require.NoError(t, err)
	type share struct {
		Actor string
		N     int64
	}
	shares, err := pgx.CollectRows(rows, pgx.RowToStructByPos[share])
	require.NoError(t, err)
	t.Logf("cancels by actor: %v", shares)
	require.Len(t, shares, 2)
	require.Equal(t, "sidecar:s1", shares[0].Actor)
	require.Equal(t, "sidecar:s2", shares[1].Actor)
	require.Positive(t, shares[0].N)
	require.Positive(t, shares[1].N)
}

// Webhooks are delivered for cancels and payments, signed so that the
// receiver's Verify accepts them; a reminder goes out only while the order
// is still PENDING at its version.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(webhooks => true, remind_before => interval '2 seconds')")

	const secret = "whsec"
	var (
		mu       sync.Mutex
		received []worker.Event
		failures []error
	)
	first := true
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := webhook.Verify(secret, r.Header.Get(webhook.SignatureHeader), body, 5*time.Minute, time.Now()); err != nil {
			failures = append(failures, err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var ev worker.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			failures = append(failures, err)
		}
		// The first delivery of an event fails: River retries it. (Not
		// a reminder's: retried past the order's expire_at, it is moot.)
		if first && ev.Type != worker.TypeExpiringSoon {
			first = false
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		received = append(received, ev)
	}))
	t.Cleanup(receiver.Close)

	cfg := e.config("s1")
	cfg.WebhookURL = receiver.URL
	cfg.WebhookSecret = secret
	sidecartest.Start(t, cfg)

	sidecartest.CreateOrder(t, e.db, "C1", 3*time.Second, "") // reminded at 1 s, cancelled at 3 s
	sidecartest.CreateOrder(t, e.db, "P1", 3*time.Second, "") // paid before its reminder: no reminder
	e.pay(t, "P1", fakegateway.Instant, "PAY1")

	types := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, ev := range received {
			out = append(out, ev.OrderID+":"+ev.Type)
		}
		return out
	}
	sidecartest.Eventually(t, 30*time.Second, "three webhooks", func() (bool, error) { return len(types()) >= 3, nil })
	require.ElementsMatch(t, []string{"C1:order.expiring_soon", "C1:order.cancelled", "P1:order.paid"}, types())
	mu.Lock()
	require.Empty(t, failures)
	mu.Unlock()
	sidecartest.Eventually(t, 10*time.Second, "the P1 reminder skipped", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_webhook'
		   AND args->>'order_id' = 'P1' AND args ? 'reminder' AND state = 'completed'`) == 1, nil
	})
	require.Len(t, types(), 3)
}

// The sidecar needs no more than the ordertimeout_sidecar role: sweep,
// gateway checks, conflict resolution, statistics and River all work for a
// login role that has only that role.
func TestRunsWithTheSidecarRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	role := "sidecar_" + strings.ReplaceAll(e.db.Config().ConnConfig.Database, "pgtest_", "")
	sidecartest.Exec(t, e.db, fmt.Sprintf("CREATE ROLE %s LOGIN IN ROLE ordertimeout_sidecar", pgx.Identifier{role}.Sanitize()))
	t.Cleanup(func() {
		_, _ = e.db.Exec(bg, fmt.Sprintf("DROP ROLE IF EXISTS %s", pgx.Identifier{role}.Sanitize()))
	})
	u, err := neturl.Parse(e.url)
	require.NoError(t, err)
	u.User = neturl.User(role)

	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
	sidecartest.CreateOrder(t, e.db, "PAID1", 200*time.Millisecond, "")
	e.pay(t, "PAID1", fakegateway.Silent, "P1")
	sidecartest.CreateOrder(t, e.db, "LATE1", 200*time.Millisecond, "")

	cfg := sidecartest.Config(u.String(), e.gw, "role")
	cfg.HTTPAddr = "127.0.0.1:0"
	s, _ := sidecartest.Start(t, cfg)

	sidecartest.WaitStatus(t, e.db, "PAID1", "PAID", 15*time.Second)
	lateConflict(t, e, "LATE1", "P2")
	sidecartest.WaitStatus(t, e.db, "LATE1", "PAID", 15*time.Second)
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.events WHERE actor = 'sidecar:role' AND cause = 'conflict'"))

	page := metricstest.Scrape(t.Context(), "http://"+s.HTTPAddr().String()+"/metrics")
	require.Positive(t, sidecartest.Metric(t, page, "ordertimeout_db_polls_total", "result", "ok"), "the role reads the statistics")
	_, found, err := metricstest.Sum(page, "ordertimeout_db_polls_total", "result", "error")
	require.NoError(t, err)
	require.False(t, found, "no read of the statistics failed")

	// River's UI works with the role too (served without auth on localhost).
	for _, path := range []string{"/riverui/api/jobs?state=completed", "/riverui/api/queues", "/riverui/api/states"} {
		resp, err := http.Get("http://" + s.HTTPAddr().String() + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, "%s: %s", path, body)
		require.Contains(t, resp.Header.Get("Content-Type"), "application/json", "%s: %s", path, body)
	}

	// Without credentials it is read-only: a job cannot be deleted, even
	// same-origin from localhost.
	jobID := sidecartest.Int(t, e.db, "SELECT max(id) FROM river_job")
	addr := s.HTTPAddr().String()
	code, answer := riverUIPost(t, addr, "/riverui/api/jobs/delete", addr, fmt.Sprintf(`{"ids":["%d"]}`, jobID),
		map[string]string{"Origin": "http://" + addr, "Content-Type": "application/json"}, "", "")
	require.Equal(t, 403, code, answer)
	require.Contains(t, answer, "the River UI is read-only without credentials")
	require.EqualValues(t, 1, sidecartest.Int(t, e.db, "SELECT count(*) FROM river_job WHERE id = $1", jobID))
}

// The HTTP server answers /healthz, /readyz and /metrics; /riverui/ is
// behind basic auth when a UI user is set.
func TestHTTPServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	cfg := e.config("s1")
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.UIUser, cfg.UIPassword = "admin", "pw"
	s, _ := sidecartest.Start(t, cfg)
	sidecartest.CreateOrder(t, e.db, "A1", 100*time.Millisecond, "")
	sidecartest.WaitStatus(t, e.db, "A1", "CANCELLED", 10*time.Second)

	base := "http://" + s.HTTPAddr().String()
	get := func(path, user, password string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := get("/healthz", "", "")
	require.Equal(t, 200, code)
	code, _ = get("/readyz", "", "")
	require.Equal(t, 200, code)
	page := metricstest.Scrape(t.Context(), base+"/metrics")
	require.Equal(t, 1.0, sidecartest.Metric(t, page, "ordertimeout_sweep_cancelled_total"))
	for _, m := range []struct {
		name   string
		labels []string
	}{
		{"ordertimeout_db_sweep", []string{"stat", "open_conflicts"}},
		{"ordertimeout_jobs_rescued_total", nil},
		{"ordertimeout_clock_offset_seconds", nil},
		{"go_goroutines", nil},
		{"process_resident_memory_bytes", nil},
	} {
		_, found, err := metricstest.Sum(page, m.name, m.labels...)
		require.NoError(t, err)
		require.True(t, found, "%s%q is served", m.name, m.labels)
	}
	require.Zero(t, sidecartest.Metric(t, page, "ordertimeout_db_sweep", "stat", "open_conflicts"))
	require.Zero(t, sidecartest.Metric(t, page, "ordertimeout_jobs_rescued_total"))
	require.InDelta(t, 0, sidecartest.Metric(t, page, "ordertimeout_clock_offset_seconds"), 0.5, "host and database share a clock here")
	code, _ = get("/riverui/", "", "")
	require.Equal(t, 401, code)
	code, body := get("/riverui/", "admin", "pw")
	require.Equal(t, 200, code, body)
	code, _ = get("/riverui/api/jobs?state=completed", "admin", "pw")
	require.Equal(t, 200, code)
	// River UI can cancel and delete jobs: never framed by another page.
	for _, auth := range [][2]string{{"", ""}, {"admin", "pw"}} {
		req, err := http.NewRequest(http.MethodGet, base+"/riverui/", nil)
		require.NoError(t, err)
		if auth[0] != "" {
			req.SetBasicAuth(auth[0], auth[1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), "user %q", auth[0])
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'", "user %q", auth[0])
	}
	// /readyz answers anyone who can reach it: a database that does not
	// answer is named, its error (host, user, database) is not.
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	require.EqualError(t, s.Ready(gone), "the database does not answer (the sidecar's log has the error)")

	// Cancel lag reaches the histogram once settled.
	sidecartest.Eventually(t, 15*time.Second, "the cancel lag histogram", func() (bool, error) {
		return sidecartest.Metric(t, page, "ordertimeout_db_cancel_lag_seconds", "cause", "timeout") == 1, nil
	})
}

func TestNewRefusesRescueBeforeJobTimeout(t *testing.T) {
	t.Parallel()
	cfg := sidecartest.Config("postgres://localhost/x", "http://localhost:1", "s1")
	cfg.JobTimeout, cfg.RescueAfter = time.Minute, 30*time.Second
	_, err := sidecar.New(t.Context(), cfg)
	require.ErrorContains(t, err, "rescue-after (30s) must be at least job-timeout (1m0s)")
	cfg.JobTimeout, cfg.RescueAfter = 100*time.Millisecond, 500*time.Millisecond
	_, err = sidecar.New(t.Context(), cfg)
	require.ErrorContains(t, err, "rescue-after must be between 1s and 24h")
}

func TestNewRefusesAJobRetentionOutOfRange(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Second, -time.Hour, 31 * 24 * time.Hour} {
		cfg := sidecartest.Config("postgres://localhost/x", "http://localhost:1", "s1")
		cfg.JobRetention = d
		_, err := sidecar.New(t.Context(), cfg)
		require.ErrorContains(t, err, "job-retention must be between 1m and 720h", "%s", d)
	}
}

// riverUIPost POSTs body to path of the sidecar's HTTP server at addr, with
// the Host header host and the headers given, as curl or a browser would.
func riverUIPost(t *testing.T, addr, path, host, body string, header map[string]string, user, password string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Host = host
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// River's UI cannot be used by another site's page: the request
// (a page of evil.example rebound to 127.0.0.1, or posting to it) deleted a
// job; now it gets 403 and the job stays. A same-origin request with the UI
// credentials still deletes it.
func TestRiverUIRefusesCrossOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	cfg := e.config("s1")
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.UIUser, cfg.UIPassword = "admin", "pw"
	s, _ := sidecartest.Start(t, cfg)
	addr := s.HTTPAddr().String()
	port := addr[strings.LastIndex(addr, ":")+1:]

	sidecartest.CreateOrder(t, e.db, "A1", time.Hour, "")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment('A1', 'P1', interval '1 hour')")
	jobID := sidecartest.Int(t, e.db, "SELECT id FROM river_job WHERE kind = 'ordertimeout_payment_check' AND args->>'order_id' = 'A1'")
	body := fmt.Sprintf(`{"ids":["%d"]}`, jobID)
	exists := func() bool {
		return sidecartest.Int(t, e.db, "SELECT count(*) FROM river_job WHERE id = $1", jobID) == 1
	}
	const path = "/riverui/api/jobs/delete"

	for name, tc := range map[string]struct {
		host   string
		header map[string]string
		user   string
		want   string
	}{
		"rebound, as in the issue":  {"evil.example:" + port, map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, "", `Host "evil.example:` + port + `" is not one this server is reached at`},
		"rebound, with credentials": {"evil.example:" + port, map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, "admin", "is not one this server is reached at"},
		"cross-origin POST":         {addr, map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, "admin", `Origin "https://evil.example" is not this server`},
		"cross-site fetch":          {addr, map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, "admin", `Sec-Fetch-Site is "cross-site"`},
		"no credentials":            {addr, map[string]string{"Origin": "http://" + addr, "Content-Type": "application/json"}, "", "unauthorized"},
	} {
		code, answer := riverUIPost(t, addr, path, tc.host, body, tc.header, tc.user, "pw")
		require.Contains(t, []int{401, 403}, code, "%s: %s", name, answer)
		require.Contains(t, answer, tc.want, name)
		require.True(t, exists(), "%s: the job must not be deleted", name)
	}

	code, answer := riverUIPost(t, addr, path, addr, body,
		map[string]string{"Origin": "http://" + addr, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, "admin", "pw")
	require.Equal(t, 200, code, answer)
	require.False(t, exists(), "a same-origin request with credentials deletes the job")
}

// A gateway URL every call would fail on (no scheme, another scheme, no host,
// a query or fragment that the calls' paths would be appended to) is refused
// at startup, naming the flag, instead of making every gateway call
// "unavailable" forever. So is such a Stripe API URL.
func TestNewRefusesAGatewayURLItCannotUse(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"pay.example.com", "ftp://pay.example.com", "http://", "http:pay.example.com", "://x",
		"https://pay.example.com/?merchant=1", "https://pay.example.com?", "https://pay.example.com/#v1", "https://pay.example.com#"} {
		cfg := sidecartest.Config("postgres://localhost/x", u, "s1")
		_, err := sidecar.New(t.Context(), cfg)
		require.ErrorContains(t, err, "must be an absolute http or https URL without a query or fragment", u)
		require.ErrorContains(t, err, "(--gateway-url)", u)
		cfg = sidecartest.Config("postgres://localhost/x", "", "s1")
		cfg.GatewayDriver, cfg.StripeKey, cfg.StripeURL = "stripe", "sk_test_x", u
		_, err = sidecar.New(t.Context(), cfg)
		require.ErrorContains(t, err, "(--stripe-api-url)", u)
	}
	// A host must have a name and a port, if any, must be one a
	// connection can go to.
	for u, want := range map[string]string{"http://:80": "has no host name", "http://:80/pay": "has no host name",
		"http://127.0.0.1:99999": "port must be between 1 and 65535", "https://pay.example.com:0/": "port must be between 1 and 65535"} {
		_, err := sidecar.New(t.Context(), sidecartest.Config("postgres://localhost/x", u, "s1"))
		require.ErrorContains(t, err, want, u)
		require.ErrorContains(t, err, "(--gateway-url)", u)
		cfg := sidecartest.Config("postgres://localhost/x", "", "s1")
		cfg.GatewayDriver, cfg.StripeKey, cfg.StripeURL = "stripe", "sk_test_x", u
		_, err = sidecar.New(t.Context(), cfg)
		require.ErrorContains(t, err, want, u)
		require.ErrorContains(t, err, "(--stripe-api-url)", u)
		cfg = sidecartest.Config("postgres://localhost/x", "http://localhost:1", "s1")
		cfg.WebhookURL, cfg.WebhookSecret = u, "whsec"
		_, err = sidecar.New(t.Context(), cfg)
		require.ErrorContains(t, err, want, u)
		require.ErrorContains(t, err, "(--webhook-url)", u)
	}
	// The error quotes the URL, but not a password in it.
	for _, u := range []string{"https://merchant:S3cretPass@pay.example.com/?merchant=1", "ftp://merchant:S3cretPass@pay.example.com", "http://merchant:S3cretPass@pay.example.com:x/"} {
		_, err := sidecar.New(t.Context(), sidecartest.Config("postgres://localhost/x", u, "s1"))
		require.ErrorContains(t, err, "(--gateway-url)", u)
		require.NotContains(t, err.Error(), "S3cretPass", u)
		cfg := sidecartest.Config("postgres://localhost/x", "http://localhost:1", "s1")
		cfg.WebhookURL, cfg.WebhookSecret = strings.Replace(u, "https", "ftp", 1), "whsec"
		_, err = sidecar.New(t.Context(), cfg)
		require.ErrorContains(t, err, "(--webhook-url)", u)
		require.NotContains(t, err.Error(), "S3cretPass", u)
	}
}

// A webhook URL without a secret is refused unless unsigned webhooks are
// asked for explicitly; so is a URL that is not http(s).
func TestNewRefusesUnsignedWebhooks(t *testing.T) {
	t.Parallel()
	cfg := sidecartest.Config("postgres://localhost/x", "http://localhost:1", "s1")
	cfg.WebhookURL = "https://shop.example/hooks"
	_, err := sidecar.New(t.Context(), cfg)
	require.ErrorContains(t, err, "a webhook URL without a webhook secret would send unsigned webhooks: set --webhook-secret, or --webhook-unsigned if unsigned webhooks are intended")
	cfg.WebhookSecret, cfg.WebhookUnsigned = "whsec", true
	_, err = sidecar.New(t.Context(), cfg)
	require.ErrorContains(t, err, "--webhook-unsigned and --webhook-secret contradict each other")
	for _, u := range []string{"ftp://shop.example/hooks", "shop.example/hooks", "http://", "://x"} {
		cfg := sidecartest.Config("postgres://localhost/x", "http://localhost:1", "s1")
		cfg.WebhookURL, cfg.WebhookSecret = u, "whsec"
		_, err = sidecar.New(t.Context(), cfg)
		require.ErrorContains(t, err, "must be an absolute http or https URL", u)
	}

	// Unsigned on purpose: it starts, and sends no signature.
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(webhooks => true)")
	signatures := make(chan string, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case signatures <- r.Header.Get(webhook.SignatureHeader):
		default:
		}
	}))
	t.Cleanup(receiver.Close)
	cfg = e.config("s1")
	cfg.WebhookURL, cfg.WebhookUnsigned = receiver.URL, true
	sidecartest.Start(t, cfg)
	sidecartest.CreateOrder(t, e.db, "A1", time.Hour, "")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('A1')")
	select {
	case sig := <-signatures:
		require.Empty(t, sig)
	case <-time.After(15 * time.Second):
		t.Fatal("no webhook within 15s")
	}
}

// A receiver answering a redirect gets no second request elsewhere: the
// redirect is a failed delivery, retried, and its Location never sees the
// signed body. Once the receiver answers 2xx, the webhook is delivered.
func TestWebhookRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(webhooks => true)")
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, _ *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	var (
		redirect  atomic.Bool
		delivered = make(chan string, 10)
	)
	redirect.Store(true)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if redirect.Load() {
			http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify("whsec", r.Header.Get(webhook.SignatureHeader), body, 5*time.Minute, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		select {
		case delivered <- string(body):
		default:
		}
	}))
	t.Cleanup(receiver.Close)
	cfg := e.config("s1")
	cfg.WebhookURL, cfg.WebhookSecret = receiver.URL, "whsec"
	sidecartest.Start(t, cfg)
	sidecartest.CreateOrder(t, e.db, "A1", time.Hour, "")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('A1')")

	sidecartest.Eventually(t, 15*time.Second, "the redirect recorded as a failed delivery", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_webhook'
		   AND errors[1]->>'error' LIKE '%receiver answered HTTP 307 (a redirect, not followed%'`) == 1, nil
	})
	require.Zero(t, elsewhere.Load(), "the redirect's Location got nothing")
	redirect.Store(false)
	select {
	case body := <-delivered:
		require.Contains(t, body, `"order_id":"A1"`)
	case <-time.After(20 * time.Second):
		t.Fatal("webhook not delivered within 20s after the receiver stopped redirecting")
	}
	require.Zero(t, elsewhere.Load())
}

// Order ids with URL syntax in them reach the gateway as themselves: the
// precancel check asks about the right order, finds it paid, and the order
// ends PAID; the gateway close of a cancelled one closes that order.
func TestOrderIDsWithURLSyntax(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
	paid := []string{"a/b", "a//b/..", "q?x=1", "h#f", "100%", "sp ace", "日本/é", "..x", "close"}
	for i, id := range paid {
		sidecartest.CreateOrder(t, e.db, id, 300*time.Millisecond, "")
		e.pay(t, id, fakegateway.Silent, fmt.Sprintf("P%d", i))
	}
	sidecartest.CreateOrder(t, e.db, "c/../x", time.Hour, `{"precheck": "never"}`)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment('c/../x', 'PC')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.fail_payment('c/../x', 'PC')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('c/../x')")
	sidecartest.Start(t, e.config("s1"))

	for i, id := range paid {
		sidecartest.WaitStatus(t, e.db, id, "PAID", 15*time.Second)
		require.EqualValues(t, 1, sidecartest.Int(t, e.db,
			"SELECT count(*) FROM ordertimeout.order_payments($1) WHERE payment_id = $2 AND status = 'confirmed'", id, fmt.Sprintf("P%d", i)))
	}
	sidecartest.Eventually(t, 15*time.Second, "the close of c/../x", func() (bool, error) {
		return e.fake.Order("c/../x").Closes == 1, nil
	})
	require.Zero(t, e.fake.Order("x").Closes)
	require.Zero(t, e.fake.Order("c").Closes)
}

// The gateway's currency reaches confirm_payment: a payment of the order's
// amount in another currency is a mismatch, never a payment of the order;
// in its currency, or without one (the order's is taken), it pays it.
func TestGatewayCurrencyReachesConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
	for id, currency := range map[string]gateway.Currency{"EUR1": "EUR", "USD1": "USD", "NONE1": ""} {
		sidecartest.CreateOrder(t, e.db, id, 300*time.Millisecond, `{"amount": 10, "currency": "EUR"}`)
		require.NoError(t, e.fake.Set(bg, id, fakegateway.Behaviour{Behaviour: fakegateway.Silent, PaymentID: "P-" + id, Amount: "10.00", Currency: currency}))
	}
	sidecartest.Start(t, e.config("s1"))

	sidecartest.WaitStatus(t, e.db, "EUR1", "PAID", 15*time.Second)
	sidecartest.WaitStatus(t, e.db, "NONE1", "PAID", 15*time.Second)
	sidecartest.WaitStatus(t, e.db, "USD1", "CANCELLED", 15*time.Second)
	for id, want := range map[string]string{"EUR1": "EUR", "NONE1": "EUR"} {
		require.EqualValues(t, 1, sidecartest.Int(t, e.db,
			"SELECT count(*) FROM ordertimeout.payments WHERE order_id = $1 AND status = 'confirmed' AND currency = $2 AND amount = 10", id, want))
	}
	require.EqualValues(t, 1, sidecartest.Int(t, e.db,
		"SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'USD1' AND payment_id = 'P-USD1' AND kind = 'amount_mismatch'"))
	require.Zero(t, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.payments WHERE order_id = 'USD1' AND status = 'confirmed'"))
}

// A sidecar of this version started on the schema just before a migration
// it needs (a rolling deploy that ships the binary before `migrate up`, or
// migrations not run yet) refuses to run, naming what is missing and the
// command, instead of failing on every sweep; once the schema is up to date
// it runs. 000018 is the last schema whose sweep_due has no column
// "deferred" (000019 added it). Before, the check looked at sweep_due alone: this binary reads conflicts
// through conflicts_to_resolve and conflict_info (000039), so on a 000038
// schema it started, swept, and failed every conflict scan and every
// resolve job (late payments never reinstated or refunded) with only an
// error line per scan. Its console reads each attempt's method from
// order_payments (000059): on 000058 every order page would fail.
func TestRefusesTheSchemaBeforeTheNewest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		version uint
		missing string
	}{
		{18, `no column "deferred"`},
		{38, "conflicts_to_resolve"},
		{58, `ordertimeout.order_payments(text) returns no column "method"`},
		{63, "it has no ordertimeout.confirm_payment(text, text, numeric, text, timestamptz)"},
	} {
		t.Run(fmt.Sprint(c.version), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db := pgtest.NewPool(t)
			url := pgtest.URL(t, db)
			_, gatewayURL := sidecartest.Fake(t, db)
			m, err := migrator.Open(url, sidecartest.Logger())
			require.NoError(t, err)
			defer m.Close() //nolint:errcheck // test cleanup
			version, _, err := m.Version()
			require.NoError(t, err)
			require.Greater(t, version, c.version)
			changed, err := m.Down(ctx, int(version-c.version), true)
			require.NoError(t, err)
			require.True(t, changed)

			s, err := sidecar.New(ctx, sidecartest.Config(url, gatewayURL, fmt.Sprintf("schema-%d", c.version)))
			require.NoError(t, err)
			runCtx, stop := context.WithTimeout(ctx, 10*time.Second)
			defer stop()
			err = s.Run(runCtx)
			require.Error(t, err, "a sidecar on the schema before a migration it needs must not run")
			require.Contains(t, err.Error(), "older than this sidecar")
			require.Contains(t, err.Error(), c.missing, "it names what is missing")
			require.Contains(t, err.Error(), "ordertimeout migrate up")

			changed, err = m.Up(ctx)
			require.NoError(t, err)
			require.True(t, changed)
			sidecartest.Start(t, sidecartest.Config(url, gatewayURL, "schema-newest"))
		})
	}
}

// A reminder goes out only before its order's expire_at, when the buyer can
// still pay: one that comes later (retried that long, or kept waiting by a
// sidecar that was down) is moot. And its id names its job: an order id that
// a purge freed and a new order took gets reminders of the same version
// under new ids. Before, both went out, the second under the first's id.
func TestReminderOnlyBeforeExpiryUnderItsOwnID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(webhooks => true, remind_before => interval '1 second', grace => interval '1 hour')")
	var (
		mu  sync.Mutex
		ids []string
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		var ev worker.Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, ev.ID)
	}))
	t.Cleanup(receiver.Close)
	w := &worker.WebhookWorker{Deps: &worker.Deps{Pool: e.db, WebhookURL: receiver.URL, WebhookClient: receiver.Client(), Logger: sidecartest.Logger()}}
	work := func(jobID int64, orderID string) error {
		args := worker.WebhookArgs{OrderID: orderID, Reminder: "expiring_soon", Version: 1}
		return w.Work(bg, &river.Job[worker.WebhookArgs]{JobRow: &rivertype.JobRow{ID: jobID, Kind: args.Kind(), Attempt: 1, MaxAttempts: 25}, Args: args})
	}

	sidecartest.CreateOrder(t, e.db, "R1", time.Hour, "")
	require.NoError(t, work(101, "R1"))
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('R1')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.close_cancelled(interval '0')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.purge_orders(interval '0')")
	sidecartest.CreateOrder(t, e.db, "R1", time.Hour, "")
	require.NoError(t, work(202, "R1"))
	mu.Lock()
	require.Len(t, ids, 2)
	require.NotEqual(t, ids[0], ids[1], "two orders, one id")
	mu.Unlock()

	// Expired (300 ms), still PENDING for the hour of grace.
	sidecartest.CreateOrder(t, e.db, "X1", 300*time.Millisecond, "")
	sidecartest.Eventually(t, 10*time.Second, "X1 past its expire_at", func() (bool, error) {
		return sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.orders WHERE order_id = 'X1' AND expire_at <= clock_timestamp()") == 1, nil
	})
	require.Equal(t, "PENDING", sidecartest.Status(t, e.db, "X1"))
	require.NoError(t, work(303, "X1"))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, ids, 2, "no reminder after expire_at")
}
