package sidecar_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/metricstest"
)

// Every metric family a working sidecar serves, its own and the go_* and
// process_* ones, passes client_golang's promlint rules (the rules of
// `promtool check metrics`), both from its registry and as served on
// /metrics; when promtool is on PATH, it checks the page too.
func TestMetricsPassLint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	cfg := e.config("lint")
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.GatewayRate = 1000
	// Every due order is checked at the gateway first: gateway calls too.
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(precheck => 'always')")
	sidecartest.CreateOrder(t, e.db, "L1", 100*time.Millisecond, "")
	s, _ := sidecartest.Start(t, cfg)
	lateConflict(t, e, "L1", "P1")
	sidecartest.WaitStatus(t, e.db, "L1", "PAID", 15*time.Second)
	url := "http://" + s.HTTPAddr().String() + "/metrics"
	page := metricstest.Scrape(t.Context(), url)
	sidecartest.Eventually(t, 15*time.Second, "every kind of family to have samples", func() (bool, error) {
		return sidecartest.Metric(t, page, "ordertimeout_db_cancel_lag_seconds") >= 1 &&
			sidecartest.Metric(t, page, "ordertimeout_conflicts_resolved_total") >= 1 &&
			sidecartest.Metric(t, page, "ordertimeout_gateway_call_seconds") >= 1, nil
	})

	for name, g := range map[string]prometheus.Gatherer{"registry": s.Registry(), "/metrics": page} {
		problems, err := testutil.GatherAndLint(g)
		require.NoError(t, err, name)
		require.Empty(t, problems, name)
	}
	require.Positive(t, testutil.CollectAndCount(s.Registry()), "families gathered")

	// tests/bin/ensure-deps (make test) puts Debian's promtool in .cache/bin.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		promtool, err = filepath.Abs(filepath.Join("..", "..", "..", ".cache", "bin", "promtool"))
		require.NoError(t, err)
		if _, err := os.Stat(promtool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("promtool is neither on PATH nor in .cache/bin (tests/bin/ensure-deps fetches it): %v", err)
			}
			t.Log("promtool is neither on PATH nor in .cache/bin: `promtool check metrics` skipped (run tests/bin/ensure-deps)")
			return
		}
	}
	resp, err := http.Get(url)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics: %s", out)
}
