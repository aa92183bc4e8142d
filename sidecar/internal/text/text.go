// Package text holds the rule the database applies to identifiers and free
// text (ordertimeout._is_plain_text and _is_identifier), so that the
// sidecar refuses hostile input the same way before it reaches PostgreSQL.
package text

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Deceptive reports whether r is a character that makes text look like
// something else in a log, a URL or a console: Unicode's categories Cc
// (controls), Cf (format characters: bidi controls, zero-width characters,
// the byte order mark, tag characters), Zl and Zp (line and paragraph
// separators).
func Deceptive(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Kind names the category of a Deceptive character for an error message:
// "control", "format" or "separator".
func Kind(r rune) string {
	switch {
	case unicode.Is(unicode.Cc, r):
		return "control"
	case unicode.Is(unicode.Cf, r):
		return "format"
	default:
		return "separator"
	}
}

// Plain reports whether s is valid UTF-8 of 1 to max characters, none of
// them Deceptive: the rule of ordertimeout._is_plain_text.
func Plain(s string, max int) bool {
	if !utf8.ValidString(s) {
		return false
	}
	n := utf8.RuneCountInString(s)
	return n >= 1 && n <= max && strings.IndexFunc(s, Deceptive) < 0
}

// ID reports whether s can name an order, a payment or a refund: Plain, and
// not "." or ".." (dot segments in a URL path): the rule of
// ordertimeout._is_identifier.
func ID(s string, max int) bool {
	return s != "." && s != ".." && Plain(s, max)
}

// Note makes s fit the rule of Plain with max characters, for free text the
// sidecar writes from what it was told (a gateway's answer in a conflict's
// note): bytes that are not UTF-8 and Deceptive characters become U+FFFD,
// and text longer than max is cut to max-1 characters and "…". An empty s
// is "-".
func Note(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if Deceptive(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}
