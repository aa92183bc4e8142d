package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/config"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/reconcile"
)

const reconcileDescription = `
Reconciles a file of the gateway's transactions against the database with
ordertimeout.reconcile_payments, in one transaction: the whole file is
applied, or (on any error) nothing. Lost callbacks on live orders are
confirmed (now PAID); money on orders that cannot take it becomes a conflict
with cause reconcile, resolved by the sidecar's policy; payments confirmed
here in the period that the file does not list are reported
(missing_at_gateway). Running the same file again changes nothing: its
conflicts are reported as known_conflict.

Formats (--format):
  csv     header exactly the six fields
          payment_id,order_id,amount,currency,status,time;
          status paid or refunded; time RFC 3339 with a zone (offset -15:59
          to +15:59, what PostgreSQL accepts); RFC 4180 quoting
  wechat  WeChat Pay's trade bill (交易账单, bill_type ALL), as downloaded;
          its summary's 总交易单数 (backquoted, then plain digits) must count the rows

The file is refused, with its line and field named, when it is larger than
64 MiB or has more than 100000 transactions, has a wrong header, a malformed
row, control characters, or an amount, currency, status or time outside its
grammar, or a time outside the period (the file of another period). The
period (--from, --to) defaults to the whole days a WeChat bill covers, or to
the first to the last time of a CSV file.

Prints the count of each outcome, then the rows that need a person (the
conflicts found, amount_differs, refund_unknown, unknown_order, other_order,
missing_at_gateway). Exit status: 0 nothing needs a person, 2 some rows do
(the file was applied, unless --dry-run), 1 an error (nothing was applied).`

// errNeedsPerson makes the command exit 2: applied, but rows need a person.
var errNeedsPerson error = needsPerson("reconcile: rows need a person (see the report)")

func reconcileCmd(ctx context.Context, args []string, stdout io.Writer) error {
	var (
		databaseURL, file, format, from, to, source, actor string
		dryRun, noMissing                                  bool
	)
	f := config.New("reconcile", "ordertimeout reconcile --file F --format csv|wechat [flags]", reconcileDescription)
	f.String(&databaseURL, "database-url", "", "PostgreSQL connection string (URL or key=value) of a role that may reconcile (ordertimeout_admin or ordertimeout_sidecar)", "DATABASE_URL", config.EnvName("database-url"))
	f.String(&file, "file", "", "the gateway's file (required); - reads standard input")
	f.String(&format, "format", "", "the file's format: csv or wechat (required)")
	f.String(&from, "from", "", "start of the period the file covers, RFC 3339 (default: see above)")
	f.String(&to, "to", "", "end of the period (exclusive), RFC 3339 (default: see above)")
	f.String(&source, "source", "", "advance this source's watermark to --to (e.g. wechat:1900012345); default none")
	f.String(&actor, "actor", "", "who reconciles, recorded on the events (default cli:<login role>)", config.EnvName("actor"))
	f.Bool(&dryRun, "dry-run", false, "judge the file and print the report, then roll everything back")
	f.Bool(&noMissing, "no-missing", false, "do not report payments confirmed here that the file does not list")
	if err := f.Parse(args, os.Getenv); err != nil {
		return err
	}
	if file == "" || format == "" {
		return errors.New("reconcile: --file and --format are required")
	}
	if databaseURL == "" {
		return errors.New("reconcile: database URL is required (--database-url or DATABASE_URL)")
	}
	in := os.Stdin
	if file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		defer fh.Close()
		in = fh
	}
	parsed, err := reconcile.Parse(in, format)
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", file, err)
	}
	start, end, err := period(parsed, from, to)
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", file, err)
	}

	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("reconcile: connect to database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT set_config('ordertimeout.actor', coalesce(nullif($1, ''), 'cli:' || session_user), true)", actor); err != nil {
		return fmt.Errorf("reconcile: set actor: %w", err)
	}
	rows, err := reconcile.Apply(ctx, tx, parsed.Transactions, start, end, !noMissing, source)
	if err != nil {
		return fmt.Errorf("reconcile %s (nothing applied): %w", file, parsed.Explain(err))
	}
	rep := &reconcile.Report{Rows: rows, Skipped: parsed.Skipped, RefundIDs: map[int]string{}}
	for _, t := range parsed.Transactions {
		if t.RefundID != "" {
			rep.RefundIDs[t.Line] = t.RefundID
		}
	}
	verb := "applied"
	if dryRun {
		verb = "dry run, rolled back"
	} else if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("reconcile %s (nothing applied): commit: %w", file, err)
	}
	fmt.Fprintf(stdout, "%s: %s %s to %s (%s)\n", file, parsed, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), verb)
	if err := rep.Write(stdout); err != nil {
		return err
	}
	if rep.NeedsPerson() {
		return errNeedsPerson
	}
	return nil
}

// period returns the period to reconcile: --from and --to, else what the
// file covers (a WeChat bill's days; a CSV file's first to last time, the
// end one second past the last).
func period(f *reconcile.File, from, to string) (time.Time, time.Time, error) {
	start, end := f.From, f.To
	if start.IsZero() && len(f.Transactions) > 0 {
		start, end = f.Transactions[0].At, f.Transactions[0].At
		for _, t := range f.Transactions {
			if t.At.Before(start) {
				start = t.At
			}
			if t.At.After(end) {
				end = t.At
			}
		}
		end = end.Add(time.Second)
	}
	var err error
	if from != "" {
		if start, err = reconcile.ParseTime(from); err != nil {
			return start, end, fmt.Errorf("--from %w", err)
		}
	}
	if to != "" {
		if end, err = reconcile.ParseTime(to); err != nil {
			return start, end, fmt.Errorf("--to %w", err)
		}
	}
	if start.IsZero() || end.IsZero() {
		return start, end, errors.New("the file lists no transactions: give the period with --from and --to")
	}
	if !start.Before(end) {
		return start, end, fmt.Errorf("the period must start before it ends, got %s to %s", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return start, end, nil
}
