// Command ordertimeout-fakegateway is a fake payment gateway that speaks the
// sidecar's gateway contract, for the demo, the tests and trying things by
// hand. It is a binary of its own, not a subcommand of ordertimeout: the
// binary a shop deploys has no fake that could confirm payments.
//
//	ordertimeout-fakegateway --listen 127.0.0.1:8070 [--database-url ...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/config"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
)

const description = `
Runs a fake payment gateway that speaks the sidecar's gateway contract, for
tests and demos. Set how it treats an order with
  POST /_fake/orders/{order_id} {"behaviour": "instant"|"late"|"silent"|"decline"|
                                 "qr"|"pay_on_close"|"down"|"slow", "delay_ms": 0,
                                 "payment_id": "P1", "amount": "12.50"}
(with payment_id the buyer pays now), the whole gateway with
  POST /_fake/gateway {"behaviour": "normal"|"down"|"slow", "delay_ms": 0}
and read its counters (queries, closes, refunds, callbacks) at GET /_fake/stats.
With --database-url, payment callbacks call ordertimeout.confirm_payment and
ordertimeout.fail_payment, as a shop's callback handler would.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := realMain(ctx, os.Args[1:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ordertimeout-fakegateway:", err)
		os.Exit(1)
	}
}

func realMain(ctx context.Context, args []string) error {
	var (
		listen      string
		databaseURL string
		log         config.Logging
	)
	f := config.New("ordertimeout-fakegateway", "ordertimeout-fakegateway [flags]", description)
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
			return fmt.Errorf("parse database URL: %w", err)
		}
		pc.ConnConfig.RuntimeParams["ordertimeout.actor"] = "gateway:fake"
		if pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return fmt.Errorf("connect to database: %w", err)
		}
		defer pool.Close()
	}
	fake := fakegateway.New(pool, logger)
	defer fake.Close()

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("fake gateway listening", "addr", ln.Addr().String(), "callbacks", pool != nil)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}
