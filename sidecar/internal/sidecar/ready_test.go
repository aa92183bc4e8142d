package sidecar_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// /readyz says not ready while the sweeps fail one after another, however
// well the database answers a ping: a database that refuses them (read-only
// after a failover, a schema rolled back) leaves due orders uncancelled.
// Before, a review saw three sidecars answer 200 while every sweep failed.
// The same for the plans of the next sweep; ready again once they work.
func TestNotReadyWhileSweepsFail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	s, _ := sidecartest.Start(t, e.config("s1"))
	ready := func() error { return s.Ready(t.Context()) }
	require.NoError(t, ready())

	for _, c := range []struct{ function, want string }{
		{"sweep_due", "sweeps failed"},
		{"plan_next_sweep", "plans of the next sweep failed"},
	} {
		sidecartest.Exec(t, e.db, "ALTER FUNCTION ordertimeout."+c.function+" RENAME TO "+c.function+"_gone")
		// A due order makes the loop sweep, then plan, again and again.
		sidecartest.CreateOrder(t, e.db, "A-"+c.function, time.Millisecond, "")
		sidecartest.Eventually(t, 20*time.Second, "not ready: "+c.want, func() (bool, error) {
			err := ready()
			return err != nil && strings.Contains(err.Error(), c.want), nil
		})
		sidecartest.Exec(t, e.db, "ALTER FUNCTION ordertimeout."+c.function+"_gone RENAME TO "+c.function)
		sidecartest.Eventually(t, 20*time.Second, "ready again", func() (bool, error) { return ready() == nil, nil })
	}
}
