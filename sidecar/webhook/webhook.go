package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader is the HTTP header carrying the signature.
const SignatureHeader = "Ordertimeout-Signature"

// Errors of Verify, to tell a bad signature from a stale one.
var (
	ErrMalformed = errors.New("webhook signature header is malformed")
	ErrMismatch  = errors.New("webhook signature does not match the body")
	ErrStale     = errors.New("webhook signature timestamp is outside the tolerance")
)

// Sign returns the value of SignatureHeader for body sent at t.
func Sign(secret string, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

// Verify checks header, the value of SignatureHeader, against body: the
// timestamp must be within tolerance of now and one of the v1 signatures must
// be the HMAC-SHA256 of "<t>.<body>" under secret. It returns nil when the
// delivery is authentic and fresh.
func Verify(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	if secret == "" {
		return errors.New("webhook secret is empty")
	}
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%w: %q is not key=value", ErrMalformed, part)
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return fmt.Errorf("%w: want t=<unix seconds>,v1=<hex>", ErrMalformed)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q: %v", ErrMalformed, ts, err)
	}
	if age := now.Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed %s ago, tolerance %s", ErrStale, age.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return ErrMismatch
}

func mac(secret, ts string, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte("."))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}
