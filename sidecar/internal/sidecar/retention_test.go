package sidecar_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecar"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// With --close-after and --purge-after (and --purge-paid-after), the leader's
// periodic retention job closes old CANCELLED orders and deletes old CLOSED
// and PAID ones, leaving recent and live ones.
func TestRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	for _, id := range []string{"old-cancelled", "new-cancelled", "old-closed", "old-paid", "new-paid", "pending"} {
		sidecartest.CreateOrder(t, e.db, id, time.Hour, "")
	}
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('old-closed')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.close_cancelled(interval '0')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['old-cancelled', 'new-cancelled']) AS id")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.confirm_payment(id, 'pay-' || id) FROM unnest(ARRAY['old-paid', 'new-paid']) AS id")
	sidecartest.Exec(t, e.db, `UPDATE ordertimeout.orders SET cancelled_at = cancelled_at - interval '40 days'
	                             WHERE order_id = 'old-cancelled'`)
	sidecartest.Exec(t, e.db, `UPDATE ordertimeout.orders SET closed_at = closed_at - interval '100 days',
	                                                          cancelled_at = cancelled_at - interval '130 days'
	                             WHERE order_id = 'old-closed'`)
	sidecartest.Exec(t, e.db, `UPDATE ordertimeout.orders SET paid_at = paid_at - interval '500 days' WHERE order_id = 'old-paid'`)

	cfg := e.config("retention")
	cfg.CloseAfter = 30 * 24 * time.Hour
	cfg.PurgeAfter = 90 * 24 * time.Hour
	cfg.PurgePaidAfter = 400 * 24 * time.Hour
	_, stop := sidecartest.Start(t, cfg)
	defer stop()
	sidecartest.Eventually(t, 30*time.Second, "the retention job to close and purge", func() (bool, error) {
		var closed, gone int
		err := e.db.QueryRow(bg, `SELECT count(*) FILTER (WHERE order_id = 'old-cancelled' AND status = 'CLOSED'),
		                                 2 - count(*) FILTER (WHERE order_id IN ('old-closed', 'old-paid'))
		                            FROM ordertimeout.orders`).Scan(&closed, &gone)
		return closed == 1 && gone == 2, err
	})
	rows, err := e.db.Query(bg, "SELECT order_id || ' ' || status FROM ordertimeout.orders ORDER BY order_id")
	require.NoError(t, err)
	var left []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		left = append(left, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"new-cancelled CANCELLED", "new-paid PAID", "old-cancelled CLOSED", "pending PENDING"}, left)
}

// Retention settings out of range are refused before anything starts.
func TestRetentionConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  func(*sidecar.Config)
		err  string
	}{
		{"negative close-after", func(c *sidecar.Config) { c.CloseAfter = -time.Second }, "close-after must be between 0 (off) and 100 years"},
		{"purge-after over 100 years", func(c *sidecar.Config) { c.PurgeAfter = 101 * 365 * 24 * time.Hour }, "purge-after must be between"},
		{"purge-paid-after alone", func(c *sidecar.Config) { c.PurgePaidAfter = time.Hour }, "purge-paid-after needs purge-after"},
		{"retention every 1 ms", func(c *sidecar.Config) { c.PurgeAfter = time.Hour; c.RetentionEvery = time.Millisecond }, "retention interval must be between 1s and 24h"},
	} {
		cfg := sidecartest.Config("postgres://nobody@127.0.0.1:1/none", "http://127.0.0.1:1", tc.name)
		tc.set(&cfg)
		_, err := sidecar.New(bg, cfg)
		require.ErrorContains(t, err, tc.err, tc.name)
	}
}
