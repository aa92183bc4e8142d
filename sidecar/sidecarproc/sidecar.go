package sidecarproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecar"
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

// Metrics are the samples of a /metrics page by series:
// `name{label="value",...}` (labels as the page writes them) or `name`.
type Metrics map[string]float64

// Sum adds the samples of metric name whose series contains every one of
// the label matchers (e.g. `result="unavailable"`).
func (m Metrics) Sum(name string, labels ...string) float64 {
	var sum float64
	for series, v := range m {
		base, rest, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
				break
			}
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// Metrics reads the sidecar's /metrics.
func (s *Sidecar) Metrics(ctx context.Context) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.HTTPAddr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", s.Name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", s.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics of %s: HTTP %d", s.Name, resp.StatusCode)
	}
	m := Metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", s.Name, err)
	}
	return m, nil
}
