package sidecarproc

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecar"
	"github.com/ordertimeout/ordertimeout/sidecar/metricstest"
)

// ReadyTimeout is how long a started sidecar or fake gateway has to answer
// HTTP.
const ReadyTimeout = 60 * time.Second

// ListenerName is the application_name of a sidecar's one LISTEN connection
// in pg_stat_activity: its pool's connections are named after the sidecar
// (PoolApplicationName), its LISTEN connection is not.
const ListenerName = sidecar.ListenerName

// PoolApplicationName is the application_name of the pool connections of
// the sidecar named name.
func PoolApplicationName(name string) string { return sidecar.ApplicationName(name) }

// SidecarConfig says how to run one sidecar.
type SidecarConfig struct {
	Bin         string   // the ordertimeout binary; required
	DatabaseURL string   // required
	GatewayURL  string   // required
	Name        string   // --name; required
	Flags       []string // more flags of `ordertimeout run`
	Env         []string // more environment ("K=V")
	// HTTPAddr is --http. If empty, a free port of 127.0.0.1.
	HTTPAddr string
	// Output, Log and OwnGroup: see Command.
	Output   io.Writer
	Log      string
	OwnGroup bool
}

// Sidecar is a running `ordertimeout run` process.
type Sidecar struct {
	*Process
	Config   SidecarConfig
	HTTPAddr string
}

// StartSidecar starts a sidecar and returns once its /readyz answers 200
// (River runs and the database answers).
func StartSidecar(ctx context.Context, cfg SidecarConfig) (*Sidecar, error) {
	addr := cfg.HTTPAddr
	if addr == "" {
		a, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		addr = a
	}
	args := append([]string{"run",
		"--database-url", cfg.DatabaseURL,
		"--gateway-url", cfg.GatewayURL,
		"--name", cfg.Name,
		"--http", addr,
	}, cfg.Flags...)
	p, err := Start(Command{Name: "sidecar " + cfg.Name, Bin: cfg.Bin, Args: args, Env: cfg.Env,
		Output: cfg.Output, Log: cfg.Log, OwnGroup: cfg.OwnGroup})
	if err != nil {
		return nil, err
	}
	s := &Sidecar{Process: p, Config: cfg, HTTPAddr: addr}
	if err := p.WaitHTTP(ctx, "http://"+addr+"/readyz", ReadyTimeout); err != nil {
		_ = p.Kill()
		return nil, err
	}
	return s, nil
}

// Metrics are the metric families of a /metrics page.
type Metrics []*dto.MetricFamily

// Sum adds the samples of family name whose labels include every pair of
// labels (name, value, ...): see metricstest.Sum. It panics when labels do
// not come in pairs.
func (m Metrics) Sum(name string, labels ...string) float64 {
	v, _, err := metricstest.Sum(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return m, nil }), name, labels...)
	if err != nil {
		panic(err)
	}
	return v
}

// Metrics reads the sidecar's /metrics.
func (s *Sidecar) Metrics(ctx context.Context) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fams, err := metricstest.Scrape(ctx, "http://"+s.HTTPAddr+"/metrics").Gather()
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", s.Name, err)
	}
	return fams, nil
}
