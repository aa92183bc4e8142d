package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/text"
)

// MaxAnswerBytes bounds the body of a gateway answer; a longer one is a bad
// answer, never read further.
const MaxAnswerBytes = 1 << 20

// Limits of an Amount: at most this many digits before and after the point.
const (
	MaxAmountIntegerDigits  = 15
	MaxAmountFractionDigits = 6
)

// MaxPaymentIDLength is the most characters a payment or refund id may have
// (the database's limit).
const MaxPaymentIDLength = 128

var amountGrammar = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// ParseAmount checks s against the amount grammar: a non-negative plain
// decimal, digits with an optional fraction ("0", "12.50"), no sign, no
// exponent, no leading zeros, at most MaxAmountIntegerDigits integer and
// MaxAmountFractionDigits fraction digits. NaN, Infinity, "1e3", "0x1p3",
// "-1", "+1", ".5", "5." and "" are refused.
func ParseAmount(s string) (Amount, error) {
	if !amountGrammar.MatchString(s) {
		return "", fmt.Errorf("amount must be a non-negative plain decimal like 12.50, got %s", quote(s))
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if len(intPart) > MaxAmountIntegerDigits {
		return "", fmt.Errorf("amount must have at most %d integer digits, got %s", MaxAmountIntegerDigits, quote(s))
	}
	if len(frac) > MaxAmountFractionDigits {
		return "", fmt.Errorf("amount must have at most %d fraction digits, got %s", MaxAmountFractionDigits, quote(s))
	}
	return Amount(s), nil
}

// Validate reports whether a is unknown (the empty Amount) or follows the
// grammar of ParseAmount.
func (a Amount) Validate() error {
	if a == "" {
		return nil
	}
	_, err := ParseAmount(string(a))
	return err
}

// Currency is an ISO 4217 code as the gateway writes it: three upper-case
// letters ("EUR"). The empty Currency means not given.
type Currency string

// UnmarshalJSON accepts a JSON string of three upper-case ASCII letters, or
// null.
func (c *Currency) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("currency must be a string, got %s", snippet(b))
	}
	if err := Currency(s).validate(); err != nil {
		return err
	}
	*c = Currency(s)
	return nil
}

func (c Currency) validate() error {
	if len(c) != 3 || strings.IndexFunc(string(c), func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return fmt.Errorf("currency must be three upper-case letters like EUR, got %s", quote(string(c)))
	}
	return nil
}

// SQL returns the currency for a text SQL parameter: nil when not given.
func (c Currency) SQL() any {
	if c == "" {
		return nil
	}
	return string(c)
}

// checkID refuses an id (field names it: payment_id, refund_id) the
// database would refuse, or that could mislead a person reading it: empty,
// longer than MaxPaymentIDLength characters, not UTF-8, "." or "..", or with
// control, format (bidi, zero-width) or line and paragraph separator
// characters.
func checkID(field, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%s is missing", field)
	case !utf8.ValidString(id):
		return fmt.Errorf("%s is not valid UTF-8", field)
	case utf8.RuneCountInString(id) > MaxPaymentIDLength:
		return fmt.Errorf("%s is longer than %d characters", field, MaxPaymentIDLength)
	case id == "." || id == "..":
		return fmt.Errorf("%s is %q", field, id)
	case strings.IndexFunc(id, text.Deceptive) >= 0:
		return fmt.Errorf("%s %s has control, format or separator characters", field, quote(id))
	}
	return nil
}

// decodeAnswer decodes a gateway answer, one JSON object, into the struct
// out points to, strictly: the body must be valid UTF-8 and exactly one JSON
// value, an object, with no key twice in any object at any depth, and no key
// that differs from one of out's field names only in case (encoding/json
// would match it to the field). Unknown keys are tolerated: gateways add
// fields.
func decodeAnswer(data []byte, out any) error {
	if !utf8.Valid(data) {
		return errors.New("answer is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("malformed JSON answer: %w", err)
	}
	if tok != json.Delim('{') {
		return errors.New("answer is not a JSON object")
	}
	keys, err := checkObject(dec, 1)
	if err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("malformed JSON answer: data after the JSON object")
	}
	names := fieldNames(out)
	for _, k := range keys {
		for _, name := range names {
			if k != name && strings.EqualFold(k, name) {
				return fmt.Errorf("answer has key %s, which differs from %q only in case", quote(k), name)
			}
		}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("answer breaks the contract: %w", err)
	}
	return nil
}

// maxDepth bounds the nesting of an answer.
const maxDepth = 32

// checkObject reads the rest of an object whose '{' was read, refusing
// duplicate keys in it and in every value nested in it; it returns its keys.
func checkObject(dec *json.Decoder, depth int) ([]string, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("answer is nested deeper than %d levels", maxDepth)
	}
	var keys []string
	seen := map[string]bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("malformed JSON answer: %w", err)
		}
		if tok == json.Delim('}') {
			return keys, nil
		}
		k, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("malformed JSON answer: unexpected %v", tok)
		}
		if seen[k] {
			return nil, fmt.Errorf("answer has key %s twice", quote(k))
		}
		seen[k] = true
		keys = append(keys, k)
		if err := checkValue(dec, depth); err != nil {
			return nil, err
		}
	}
}

// checkValue reads one value, checking the objects in it.
func checkValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("malformed JSON answer: %w", err)
	}
	switch tok {
	case json.Delim('{'):
		_, err := checkObject(dec, depth+1)
		return err
	case json.Delim('['):
		if depth+1 > maxDepth {
			return fmt.Errorf("answer is nested deeper than %d levels", maxDepth)
		}
		for dec.More() {
			if err := checkValue(dec, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return fmt.Errorf("malformed JSON answer: %w", err)
		}
	}
	return nil
}

// fieldNames returns the JSON names of the fields of the struct v points to.
func fieldNames(v any) []string {
	t := reflect.TypeOf(v).Elem()
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// quote quotes s for an error message, cut to a readable length.
func quote(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q...", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}
