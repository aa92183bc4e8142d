package sidecarproc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
)

// Behaviours of the fake gateway (see `ordertimeout-fakegateway --help`).
const (
	Instant = fakegateway.Instant // paid at once; the callback confirms at once
	Late    = fakegateway.Late    // paid after DelayMS; then the callback confirms
	Silent  = fakegateway.Silent  // paid at once; no callback
	Decline = fakegateway.Decline // failed; the callback fails the payment
	Down    = fakegateway.Down    // answers 503
	Slow    = fakegateway.Slow    // answers after DelayMS
	Normal  = fakegateway.Normal  // the whole gateway behaves
)

// Behaviour is the body of the fake's POST /_fake/orders/{order_id} and POST
// /_fake/gateway.
type Behaviour = fakegateway.Behaviour

// FakeStats are the fake's counters (GET /_fake/stats).
type FakeStats = fakegateway.Stats

// Fake is a running ordertimeout-fakegateway process.
type Fake struct {
	*Process
	// URL is the gateway's base URL, for the sidecars' --gateway-url.
	URL    string
	client *http.Client
}

// FakeConfig says how to run the fake gateway.
type FakeConfig struct {
	Bin string // the ordertimeout-fakegateway binary (FakeBinary); required
	// DatabaseURL receives the payment callbacks. If empty, none are made.
	DatabaseURL string
	// Addr is --listen. If empty, a free port of 127.0.0.1.
	Addr string
	// Flags are more flags of ordertimeout-fakegateway (e.g. "--log-level",
	// "warn").
	Flags []string
	// Output, Log and OwnGroup: see Command.
	Output   io.Writer
	Log      string
	OwnGroup bool
}

// StartFake starts the fake gateway and returns once it answers.
func StartFake(ctx context.Context, cfg FakeConfig) (*Fake, error) {
	addr := cfg.Addr
	if addr == "" {
		a, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		addr = a
	}
	args := append([]string{"--listen", addr, "--database-url", cfg.DatabaseURL}, cfg.Flags...)
	p, err := Start(Command{Name: "fake gateway", Bin: cfg.Bin, Args: args, Output: cfg.Output, Log: cfg.Log, OwnGroup: cfg.OwnGroup})
	if err != nil {
		return nil, err
	}
	f := &Fake{Process: p, URL: "http://" + addr, client: &http.Client{Timeout: 30 * time.Second}}
	if err := p.WaitHTTP(ctx, f.URL+"/_fake/stats", ReadyTimeout); err != nil {
		_ = p.Kill()
		return nil, err
	}
	return f, nil
}

// SetOrder sets how the fake treats an order; with a PaymentID the buyer
// pays now. An instant or decline callback has finished when it returns.
func (f *Fake) SetOrder(ctx context.Context, orderID string, b Behaviour) error {
	return f.post(ctx, "/_fake/orders/"+url.PathEscape(orderID), b)
}

// SetGateway sets how the whole gateway answers: Normal, Down, or Slow
// (answers after delay).
func (f *Fake) SetGateway(ctx context.Context, behaviour string, delay time.Duration) error {
	return f.post(ctx, "/_fake/gateway", Behaviour{Behaviour: behaviour, DelayMS: int(delay.Milliseconds())})
}

// Stats returns the fake's counters.
func (f *Fake) Stats(ctx context.Context) (FakeStats, error) {
	var st FakeStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL+"/_fake/stats", nil)
	if err != nil {
		return st, fmt.Errorf("fake gateway stats: %w", err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return st, fmt.Errorf("fake gateway stats: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("fake gateway stats: decode: %w", err)
	}
	return st, nil
}

func (f *Fake) post(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("fake gateway %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("fake gateway %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return fmt.Errorf("fake gateway %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("fake gateway %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}
