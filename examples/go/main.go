// Command go runs the order lifecycle through ordertimeout's SQL API with pgx.
//
//	DATABASE_URL=postgres://... go run ./examples/go ORDER_ID
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func main() {
	if err := realMain(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func realMain(ctx context.Context) error {
	if len(os.Args) != 2 {
		return errors.New("usage: go run ./examples/go ORDER_ID")
	}
	orderID := os.Args[1]

	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)

	if _, err := conn.Exec(ctx, `SELECT ordertimeout.put_stock('SKU-EXAMPLE', 1000)`); err != nil {
		return fmt.Errorf("put stock: %w", err)
	}

	var status string
	var created bool
	err = conn.QueryRow(ctx,
		`SELECT status, created FROM ordertimeout.create_order($1, $2, '15 minutes', '{"amount": 19.90}')`,
		orderID, `[{"sku": "SKU-EXAMPLE", "qty": 2}]`).Scan(&status, &created)
	if err != nil {
		return fmt.Errorf("create order: %w", err)
	}
	fmt.Printf("created %s: %s (new: %v)\n", orderID, status, created)

	// Errors carry their own SQLSTATE: class OT, listed in the README.
	_, err = conn.Exec(ctx, `SELECT ordertimeout.create_order($1, '[]')`, orderID+"-bad")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		fmt.Printf("bad input refused: %s %s\n", pgErr.Code, pgErr.Message)
	}

	paymentID := orderID + "-pay"
	if _, err := conn.Exec(ctx, `SELECT ordertimeout.begin_payment($1, $2)`, orderID, paymentID); err != nil {
		return fmt.Errorf("begin payment: %w", err)
	}
	var outcome string
	if err := conn.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2, 19.90)`, orderID, paymentID).Scan(&outcome); err != nil {
		return fmt.Errorf("confirm payment: %w", err)
	}
	fmt.Printf("payment: %s\n", outcome)

	rows, err := conn.Query(ctx, `SELECT coalesce(from_status, '-'), to_status, cause FROM ordertimeout.order_events($1)`, orderID)
	if err != nil {
		return fmt.Errorf("order events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var from, to, cause string
		if err := rows.Scan(&from, &to, &cause); err != nil {
			return fmt.Errorf("scan event: %w", err)
		}
		fmt.Printf("event: %s -> %s (%s)\n", from, to, cause)
	}
	return rows.Err()
}
