package reconcile

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/text"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// Limits of a file: larger files are refused whole (split them by period).
// MaxRows is also the most transactions reconcile_payments takes in one call.
const (
	MaxFileBytes = 64 << 20
	MaxRows      = 100000
)

// Formats of a file (Parse).
const (
	FormatCSV    = "csv"
	FormatWeChat = "wechat"
)

// Status values of a transaction.
const (
	StatusPaid     = "paid"
	StatusRefunded = "refunded"
)

// CSVHeader is the header line of the documented CSV format.
const CSVHeader = "payment_id,order_id,amount,currency,status,time"

// maxOrderIDLength is the most characters of an order id (the database's
// limit).
const maxOrderIDLength = 64

// Transaction is one of the gateway's transactions, as reconcile_payments
// takes it.
type Transaction struct {
	// Line is the transaction's line in its file (0: not from a file).
	Line      int
	PaymentID string
	OrderID   string
	Amount    gateway.Amount
	Currency  gateway.Currency
	// Status is StatusPaid or StatusRefunded.
	Status string
	At     time.Time
	// RefundID is the gateway's refund id of a refund, when the file has
	// one; it is shown in reports, not sent to the database.
	RefundID string
}

// MarshalJSON writes the transaction as reconcile_payments reads it.
func (t Transaction) MarshalJSON() ([]byte, error) {
	v := struct {
		Line      int    `json:"line,omitempty"`
		PaymentID string `json:"payment_id"`
		OrderID   string `json:"order_id"`
		Amount    string `json:"amount"`
		Currency  string `json:"currency"`
		Status    string `json:"status"`
		At        string `json:"at"`
	}{t.Line, t.PaymentID, t.OrderID, string(t.Amount), string(t.Currency), t.Status, t.At.Format(timeLayout)}
	return json.Marshal(v)
}

// timeLayout is RFC 3339 with at most microseconds, what the database keeps.
const timeLayout = "2006-01-02T15:04:05.999999Z07:00"

// File is a parsed file.
type File struct {
	Format       string
	Transactions []Transaction
	// Skipped counts rows that move no money and are left out (WeChat's
	// REVOKED payments).
	Skipped int
	// From and To are the period the file covers, when its format says
	// (WeChat's bill covers whole days); zero otherwise.
	From, To time.Time
	// columns names the file's column of each field reconcile_payments
	// reads (its JSON name), for the database's errors (Explain); amount
	// of a refund row in refundAmount when that differs.
	columns      map[string]string
	refundAmount string
}

// dbLineError is how reconcile_payments names a bad row (OT171): "line 7:
// amount must be ...", the field by its JSON name.
var dbLineError = regexp.MustCompile(`^line ([0-9]+): (payment_id|order_id|amount|currency|status|at) (.*)$`)

// Explain gives the database's error about a row of the file (OT171,
// naming the line and the field by its JSON name) in the file's words:
// "line 7, field time: at ... is outside the period ...", the field named
// by the file's column. Any other error is returned as it is.
func (f *File) Explain(err error) error {
	var pe *pgconn.PgError
	if f == nil || !errors.As(err, &pe) || pe.Code != sqlstate.InvalidTransaction {
		return err
	}
	m := dbLineError.FindStringSubmatch(pe.Message)
	if m == nil {
		return err
	}
	line, convErr := strconv.Atoi(m[1])
	if convErr != nil {
		return err
	}
	column := f.columns[m[2]]
	if m[2] == "amount" && f.refundAmount != "" {
		for _, t := range f.Transactions {
			if t.Line == line && t.Status == StatusRefunded {
				column = f.refundAmount
			}
		}
	}
	if column == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", &LineError{Line: line, Field: column, Msg: m[2] + " " + m[3]}, pe.Code)
}

// LineError is a problem with one line of a file. Field is the column's
// name, or empty when the line as a whole is wrong.
type LineError struct {
	Line  int
	Field string
	Msg   string
}

// Error says "line 7, field amount: ...".
func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d, field %s: %s", e.Line, e.Field, e.Msg)
}

func lineErr(line int, field, format string, args ...any) error {
	return &LineError{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Parse reads a whole file in format (FormatCSV or FormatWeChat).
func Parse(r io.Reader, format string) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read file: %w", err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("file is larger than %d MiB: split it by period", MaxFileBytes>>20)
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	switch format {
	case FormatCSV:
		return parseCSV(data)
	case FormatWeChat:
		return parseWeChat(data)
	default:
		return nil, fmt.Errorf("format must be %s or %s, got %q", FormatCSV, FormatWeChat, format)
	}
}

// checkText refuses a field that is not UTF-8 or has control, format (bidi,
// zero-width) or separator characters.
func checkText(line int, field, s string) error {
	if !utf8.ValidString(s) {
		return lineErr(line, field, "not valid UTF-8")
	}
	if i := strings.IndexFunc(s, text.Deceptive); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return lineErr(line, field, "%s character %U in %s", text.Kind(r), r, quote(s))
	}
	return nil
}

// checkID checks a payment or order id: 1 to max characters, not "." or
// "..", no surrounding spaces (the database's rules).
func checkID(line int, field, s string, maxLen int) error {
	switch {
	case s == "":
		return lineErr(line, field, "is empty")
	case utf8.RuneCountInString(s) > maxLen:
		return lineErr(line, field, "longer than %d characters", maxLen)
	case s == "." || s == "..":
		return lineErr(line, field, "must not be %q", s)
	case strings.TrimSpace(s) != s:
		return lineErr(line, field, "has leading or trailing spaces: %s", quote(s))
	}
	return nil
}

func parseAmount(line int, field, s string) (gateway.Amount, error) {
	a, err := gateway.ParseAmount(s)
	if err != nil {
		return "", lineErr(line, field, "%v", err)
	}
	return a, nil
}

func parseCurrency(line int, field, s string) (gateway.Currency, error) {
	if len(s) != 3 || strings.IndexFunc(s, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return "", lineErr(line, field, "must be three upper-case letters like EUR, got %s", quote(s))
	}
	return gateway.Currency(s), nil
}

// newReader returns a CSV reader over data that keeps leading spaces (they
// are errors, not trimmed) and reuses no records.
func newReader(data []byte) *csv.Reader {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	return cr
}

// readErr turns a CSV syntax error into a LineError.
func readErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &LineError{Line: pe.Line, Msg: fmt.Sprintf("column %d: %v", pe.Column, pe.Err)}
	}
	return fmt.Errorf("read file: %w", err)
}

var csvColumns = strings.Split(CSVHeader, ",")

func parseCSV(data []byte) (*File, error) {
	cr := newReader(data)
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, lineErr(1, "", "the file is empty: the first line must be the header %s", CSVHeader)
	}
	if err != nil {
		return nil, readErr(err)
	}
	// Field by field: joined, a quoted "payment_id,order_id" would read as
	// two columns.
	if !slices.Equal(header, csvColumns) {
		return nil, lineErr(1, "", "the header must be exactly %s (%d fields), got %d fields: %s",
			CSVHeader, len(csvColumns), len(header), quote(csvLine(header)))
	}
	f := &File{Format: FormatCSV, columns: map[string]string{
		"payment_id": "payment_id", "order_id": "order_id", "amount": "amount", "currency": "currency", "status": "status", "at": "time",
	}}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, readErr(err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(csvColumns) {
			return nil, lineErr(line, "", "has %d fields, the header %d", len(rec), len(csvColumns))
		}
		if len(f.Transactions) == MaxRows {
			return nil, lineErr(line, "", "more than %d transactions: split the file by period", MaxRows)
		}
		for i, v := range rec {
			if err := checkText(line, csvColumns[i], v); err != nil {
				return nil, err
			}
		}
		t := Transaction{Line: line, PaymentID: rec[0], OrderID: rec[1], Status: rec[4]}
		if err := checkID(line, "payment_id", t.PaymentID, gateway.MaxPaymentIDLength); err != nil {
			return nil, err
		}
		if err := checkID(line, "order_id", t.OrderID, maxOrderIDLength); err != nil {
			return nil, err
		}
		if t.Amount, err = parseAmount(line, "amount", rec[2]); err != nil {
			return nil, err
		}
		if t.Currency, err = parseCurrency(line, "currency", rec[3]); err != nil {
			return nil, err
		}
		if t.Status != StatusPaid && t.Status != StatusRefunded {
			return nil, lineErr(line, "status", "must be paid or refunded, got %s", quote(t.Status))
		}
		if t.At, err = parseRFC3339(line, "time", rec[5]); err != nil {
			return nil, err
		}
		f.Transactions = append(f.Transactions, t)
	}
	if err := checkDuplicates(f.Transactions, "payment_id"); err != nil {
		return nil, err
	}
	return f, nil
}

// parseRFC3339 reads a time with a zone whose offset PostgreSQL accepts (at
// most 15:59 east or west of UTC), at most microseconds.
func parseRFC3339(line int, field, s string) (time.Time, error) {
	t, err := ParseTime(s)
	if err != nil {
		return time.Time{}, lineErr(line, field, "%v", err)
	}
	return t, nil
}

// ParseTime reads a time as the gateway's records must write it
// (gateway.ParseTime: RFC 3339, a zone PostgreSQL accepts), at most
// microseconds: the times of CSV files, and the period of the reconcile
// command.
func ParseTime(s string) (time.Time, error) {
	t, err := gateway.ParseTime(s)
	if err != nil {
		return time.Time{}, err
	}
	if t.Nanosecond()%1000 != 0 {
		return time.Time{}, fmt.Errorf("more precise than microseconds: %s", quote(s))
	}
	return t, nil
}

// checkDuplicates refuses a payment listed twice with the same status,
// naming field, the file's column of the payment id.
func checkDuplicates(ts []Transaction, field string) error {
	seen := make(map[[2]string]int, len(ts))
	for _, t := range ts {
		k := [2]string{t.PaymentID, t.Status}
		if first, ok := seen[k]; ok {
			return lineErr(t.Line, field, "payment %s is %s twice in the file (first on line %d)", quote(t.PaymentID), t.Status, first)
		}
		seen[k] = t.Line
	}
	return nil
}

// csvLine writes fields as one CSV record, quoted where needed, without its
// line end: how a header looked in the file.
func csvLine(fields []string) string {
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.Write(fields) // a strings.Builder does not fail
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// quote quotes s for an error message, cut to a readable length.
func quote(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q...", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}
