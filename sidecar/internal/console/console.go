package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/server"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/text"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

// Roles of a console user.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
)

// csrfLifetime is how long a form's CSRF token is accepted. A page left
// open longer is reloaded before it can act.
const csrfLifetime = 12 * time.Hour

// maxUserLength bounds a user name: "console:" + name must fit the 200
// characters ordertimeout.actor allows.
const maxUserLength = 64

//go:embed templates/*.html static/*
var assets embed.FS

// Credentials are one user's name and password for HTTP basic auth.
type Credentials struct {
	User     string
	Password string
}

// ParseCredentials reads "user:password" (the password may contain ':').
// The empty string gives zero Credentials (nobody).
func ParseCredentials(s string) (Credentials, error) {
	if s == "" {
		return Credentials{}, nil
	}
	user, password, ok := strings.Cut(s, ":")
	if !ok || user == "" || password == "" {
		return Credentials{}, errors.New(`want "user:password" with a non-empty user and password`)
	}
	return Credentials{User: user, Password: password}, nil
}

func (c Credentials) set() bool { return c.User != "" }

// Config configures a console Handler.
type Config struct {
	// Pool is the database the console reads and acts on. It is required.
	// Its role needs what ordertimeout_sidecar has (the stats views,
	// open_conflicts, resolve_conflict, order_info, order_events,
	// order_payments); the history of resolved conflicts and an order's
	// holds and releases are read from the tables, which only
	// ordertimeout_admin may read: without it those parts say so.
	Pool *pgxpool.Pool

	// Viewer may read every page. Operator may read and act. At least one
	// must be set unless Anonymous is.
	Viewer, Operator Credentials

	// Anonymous serves the console read-only without credentials, when
	// neither Viewer nor Operator is set. The sidecar sets it only when it
	// listens on loopback (as for River's UI).
	Anonymous bool

	// TrustedHosts are more host names whose pages may act (their Origin
	// is taken for this server's), as the HTTP server's AllowedHosts:
	// e.g. the name of a reverse proxy that rewrites Host. Matched
	// case-insensitively, ports ignored.
	TrustedHosts []string

	// Gateway, if set, is asked before a reinstatement whether it still
	// holds the late payment's money (worker.CheckHeld): one a person
	// refunded there is not reinstated. The sidecar always sets it.
	Gateway gateway.Gateway

	// Logger logs refused requests and database errors. If nil,
	// slog.Default() is used.
	Logger *slog.Logger
}

// Handler serves the console under Prefix. Create it with New.
type Handler struct {
	cfg     Config
	logger  *slog.Logger
	mux     *http.ServeMux
	pages   map[string]*template.Template
	static  http.Handler
	trusted map[string]bool
}

type user struct {
	Name string
	Role string
	key  []byte // CSRF key, from the password; nil for anonymous
}

// Operator reports whether the user may act.
func (u *user) Operator() bool { return u.Role == RoleOperator }

// New checks cfg and returns the console's handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Pool == nil {
		return nil, errors.New("console: a database pool is required")
	}
	for _, c := range []struct {
		role string
		cred Credentials
	}{{RoleViewer, cfg.Viewer}, {RoleOperator, cfg.Operator}} {
		if !c.cred.set() {
			continue
		}
		if !text.Plain(c.cred.User, maxUserLength) {
			return nil, fmt.Errorf("console %s user must be 1 to %d characters without control or format characters", c.role, maxUserLength)
		}
		if c.cred.Password == "" {
			return nil, fmt.Errorf("console %s %q needs a password", c.role, c.cred.User)
		}
	}
	if cfg.Viewer.set() && cfg.Operator.set() && cfg.Viewer.User == cfg.Operator.User {
		return nil, fmt.Errorf("console viewer and operator must have different user names (both are %q)", cfg.Viewer.User)
	}
	if !cfg.Viewer.set() && !cfg.Operator.set() && !cfg.Anonymous {
		return nil, errors.New("console: set a viewer or an operator (user:password), or serve it read-only to anyone")
	}
	h := &Handler{cfg: cfg, logger: cfg.Logger, pages: map[string]*template.Template{}, trusted: map[string]bool{}}
	for _, host := range cfg.TrustedHosts {
		h.trusted[server.Hostname(host)] = true
	}
	if h.logger == nil {
		h.logger = slog.Default()
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, fmt.Errorf("console: static files: %w", err)
	}
	h.static = http.StripPrefix(Prefix+"static/", http.FileServer(http.FS(static)))

	mux := http.NewServeMux()
	for _, rt := range []struct {
		method, path string
		handler      http.Handler
	}{
		{http.MethodGet, Prefix + "{$}", http.HandlerFunc(h.overview)},
		{http.MethodGet, Prefix + "conflicts", http.HandlerFunc(h.conflicts)},
		{http.MethodPost, Prefix + "conflicts/{id}/resolve", http.HandlerFunc(h.resolve)},
		{http.MethodGet, Prefix + "order", http.HandlerFunc(h.order)},
		{http.MethodGet, Prefix + "settings", http.HandlerFunc(h.settings)},
		{http.MethodPost, Prefix + "settings/pause", http.HandlerFunc(h.pause)},
		{http.MethodGet, Prefix + "static/", h.static},
	} {
		mux.Handle(rt.method+" "+rt.path, rt.handler)
		// The catch-all below would answer 404 to another method on this
		// path; it is a 405 naming the methods it takes.
		allow := rt.method
		if rt.method == http.MethodGet {
			allow += ", " + http.MethodHead
		}
		mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			h.fail(w, r, http.StatusMethodNotAllowed, "This page takes "+allow+" only.")
		})
	}
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "There is no such page.")
	})
	h.mux = mux
	return h, nil
}

// ServeHTTP authenticates the request and serves the page it asks for.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// Nothing loads from elsewhere; no script runs; no other site frames us.
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	u := h.authenticate(r)
	if u == nil {
		hd.Set("WWW-Authenticate", `Basic realm="ordertimeout console", charset="UTF-8"`)
		http.Error(w, "unauthorized: sign in as a console viewer or operator", http.StatusUnauthorized)
		return
	}
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
}

type userKey struct{}

func userOf(r *http.Request) *user {
	u, _ := r.Context().Value(userKey{}).(*user)
	return u
}

// authenticate returns the signed-in user, or nil. Both credentials are
// compared every time, in constant time.
func (h *Handler) authenticate(r *http.Request) *user {
	if !h.cfg.Viewer.set() && !h.cfg.Operator.set() {
		return &user{Name: "anonymous", Role: RoleViewer}
	}
	name, password, ok := r.BasicAuth()
	if !ok {
		return nil
	}
	match := func(c Credentials) bool {
		if !c.set() {
			return false
		}
		u := subtle.ConstantTimeCompare([]byte(name), []byte(c.User))
		p := subtle.ConstantTimeCompare([]byte(password), []byte(c.Password))
		return u&p == 1
	}
	isOperator, isViewer := match(h.cfg.Operator), match(h.cfg.Viewer)
	switch {
	case isOperator:
		return &user{Name: name, Role: RoleOperator, key: csrfKey(h.cfg.Operator)}
	case isViewer:
		return &user{Name: name, Role: RoleViewer, key: csrfKey(h.cfg.Viewer)}
	}
	return nil
}

// csrfKey derives a user's CSRF key from the password: tokens are the same
// on every sidecar with the same credentials, and void when the password
// changes.
func csrfKey(c Credentials) []byte {
	m := hmac.New(sha256.New, []byte(c.Password))
	m.Write([]byte("ordertimeout console csrf v1\x00" + c.User))
	return m.Sum(nil)
}

// csrfToken returns a token for u's forms, issued at now: "<unix>.<mac>".
func csrfToken(u *user, now time.Time) string {
	if u.key == nil {
		return ""
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	return ts + "." + csrfMAC(u, ts)
}

func csrfMAC(u *user, ts string) string {
	m := hmac.New(sha256.New, u.key)
	m.Write([]byte(u.Name + "\x00" + ts))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF says why token is not a valid token of u at now, or "".
func checkCSRF(u *user, token string, now time.Time) string {
	if u.key == nil {
		return "no CSRF key for this user"
	}
	if token == "" {
		return "the form carries no CSRF token"
	}
	ts, mac, ok := strings.Cut(token, ".")
	if !ok || len(ts) > 20 || len(mac) > 64 {
		return "the CSRF token is malformed"
	}
	if !hmac.Equal([]byte(mac), []byte(csrfMAC(u, ts))) {
		return "the CSRF token is not this user's"
	}
	issued, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "the CSRF token is malformed"
	}
	age := now.Sub(time.Unix(issued, 0))
	if age < -time.Minute || age > csrfLifetime {
		return "the CSRF token has expired: reload the page"
	}
	return ""
}

// isOrderID mirrors ordertimeout._check_order_id.
func isOrderID(s string) bool {
	return len(s) <= 256 && text.ID(s, 64)
}

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	User  *user
	CSRF  string
	Error string
	Info  string
	Data  any
}

func (h *Handler) parseTemplates() error {
	funcs := template.FuncMap{
		"age": formatAge,
		"ts":  formatTime,
		"ms": func(v *float64) string {
			if v == nil {
				return "—"
			}
			return fmt.Sprintf("%.1f ms", *v)
		},
		"pathID": func(id int64) string { return strconv.FormatInt(id, 10) },
	}
	for _, name := range []string{"overview", "conflicts", "order", "settings", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("console: parse template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// render writes the page; an error in the template is logged (the status is
// sent already).
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.User = userOf(r)
	if p.User != nil && p.User.Operator() {
		p.CSRF = csrfToken(p.User, time.Now())
	}
	if p.Nav == "" {
		p.Nav = name
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := h.pages[name].Execute(w, p); err != nil {
		h.logger.Error("console: render page", "page", name, "error", err)
	}
}

// fail renders an error page with a message for a person.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "error", page{Title: http.StatusText(status), Nav: "-", Error: msg})
}

// dbFail logs a database error and tells the user without its details.
func (h *Handler) dbFail(w http.ResponseWriter, r *http.Request, what string, err error) {
	h.logger.Error("console: database", "what", what, "error", err)
	h.fail(w, r, http.StatusInternalServerError, "The database could not "+what+"; the sidecar's log has the details.")
}

func formatAge(seconds float64) string {
	if seconds < 0 {
		return "in " + formatAge(-seconds)
	}
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// formatTime formats a time.Time or a *time.Time (nil: a dash) in UTC.
func formatTime(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x == nil {
			return "—"
		}
		t = *x
	default:
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}
