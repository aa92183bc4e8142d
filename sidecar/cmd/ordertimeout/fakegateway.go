package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/config"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
)

const fakegatewayDescription = `
Runs a fake payment gateway that speaks the sidecar's gateway contract, for
tests and demos. Set how it treats an order with
  POST /_fake/orders/{order_id} {"behaviour": "instant"|"late"|"silent"|"decline"|"down"|"slow",
                                 "delay_ms": 0, "payment_id": "P1", "amount": "12.50"}
(with payment_id the buyer pays now), the whole gateway with
  POST /_fake/gateway {"behaviour": "normal"|"down"|"slow", "delay_ms": 0}
and read its counters (queries, closes, refunds, callbacks) at GET /_fake/stats.
With --database-url, payment callbacks call ordertimeout.confirm_payment and
ordertimeout.fail_payment, as a shop's callback handler would.`

func fakegatewayCmd(ctx context.Context, args []string) error {
	var (
		listen      string
		databaseURL string
		log         config.Logging
	)
	f := config.New("fakegateway", "ordertimeout fakegateway [flags]", fakegatewayDescription)
	f.String(&listen, "listen", "127.0.0.1:8070", "address to listen on")
	f.String(&databaseURL, "database-url", "", "PostgreSQL connection string for payment callbacks; none: no callbacks", "DATABASE_URL", config.EnvName("database-url"))
	log.AddFlags(f)
	if err := f.Parse(args, os.Getenv); err != nil {
		return err
	}
	logger, err := log.Logger(os.Stderr)
	if err != nil {
		return err
	}

	var pool *pgxpool.Pool
	if databaseURL != "" {
		pc, err := pgxpool.ParseConfig(databaseURL)
		if err != nil {
			return fmt.Errorf("fakegateway: parse database URL: %w", err)
		}
		pc.ConnConfig.RuntimeParams["ordertimeout.actor"] = "gateway:fake"
		if pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return fmt.Errorf("fakegateway: connect to database: %w", err)
		}
		defer pool.Close()
	}
	fake := fakegateway.New(pool, logger)
	defer fake.Close()

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("fakegateway: listen on %s: %w", listen, err)
	}
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("fake gateway listening", "addr", ln.Addr().String(), "callbacks", pool != nil)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("fakegateway: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("fakegateway: shut down: %w", err)
	}
	return nil
}
