// Package ui is agentworld's web UI: server-rendered pages over benchmark
// runs (scores with intervals, per-domain figures and charts, the trust
// report and error taxonomy, two runs compared sample by sample, one
// sample's history, prediction against truth and judgement), the
// simulator's sessions (transcripts paged from the session database, fork
// trees), rollout groups and research runs, and human labelling that
// feeds the judges' agreement figures.
//
// Pages are html/template output with a small embedded stylesheet and
// script (keyboard navigation); nothing is fetched from elsewhere, so it
// works offline. The template package is DataDog's copy of html/template
// that cannot call methods (a template may read fields, map keys and call
// its FuncMap): the standard one looks methods up by name at run time,
// which makes the linker keep every exported method of every type in the
// binary (4.7 MB of it). Page data is therefore plain fields. Every request passes the same HTTP edge as serve (Host
// and Origin checks); the only state-changing route, a label submission,
// also needs the page's CSRF token, and exists only when labelling is on.
package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	template "github.com/DataDog/datadog-agent/pkg/template/html"

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/httpedge"
	"github.com/agentworld/agentworld/internal/labels"
	"github.com/agentworld/agentworld/internal/runview"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
)

//go:embed templates/*.html static/*
var files embed.FS

// DefaultPageSize is the number of rows (samples, sessions, turns) a page
// shows by default.
const DefaultPageSize = 50

// MaxLabelBytes bounds a label submission's body.
const MaxLabelBytes = 16 << 10

// Sessions reads the simulator's sessions one page at a time
// (*store.DB implements it).
type Sessions interface {
	ListSessions(ctx context.Context, offset, limit int) ([]store.SessionSummary, error)
	SessionFamily(ctx context.Context, root string) ([]store.SessionSummary, error)
	TurnsPage(ctx context.Context, id string, from, limit int) (sim.SessionRecord, []sim.TurnRecord, int, error)
}

// Options configure a [Server]; nil means defaults.
type Options struct {
	// Runs reads benchmark runs; nil shows none.
	Runs runview.Source
	// Sessions reads the simulator's sessions; nil shows none.
	Sessions Sessions
	// Rollouts and Research are directories of rollout runs and research
	// runs (each a run directory or a directory of them); nil shows none.
	Rollouts, Research []string
	// Labels, when set, turns labelling on: samples get a label form and
	// the trust reports count the labels. nil: read-only.
	Labels *labels.DB
	// Edge is the HTTP edge (Host and Origin checks, timeouts); zero
	// values are its safe defaults.
	Edge httpedge.Edge
	// PageSize is the rows per page; 0 means DefaultPageSize.
	PageSize int
	// Logger receives request errors; nil discards them.
	Logger *slog.Logger
}

// Server serves the UI.
type Server struct {
	o      Options
	guard  *httpedge.Guard
	tmpl   map[string]*template.Template
	secret []byte
	log    *slog.Logger
	mux    *http.ServeMux
}

// New builds a server.
func New(opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g, err := httpedge.New(o.Edge, &httpedge.Options{MaxBodyBytes: MaxLabelBytes, Logger: log})
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	s := &Server{o: o, guard: g, secret: secret, log: log, mux: http.NewServeMux()}
	if s.tmpl, err = parseTemplates(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Guard is the server's HTTP edge, for listening ([httpedge.Guard.Listen],
// [httpedge.Guard.HTTPServer]).
func (s *Server) Guard() *httpedge.Guard { return s.guard }

// ServeHTTP admits the request at the edge (Host and Origin) and routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if ref := s.guard.AdmitOpen(w, r); ref != nil {
		s.fail(w, r, ref.Status, ref.Message, ref)
		return
	}
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin") // not no-referrer: Chromium then sends Origin: null on a form POST
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	s.mux.Handle("GET /static/", http.FileServerFS(files))
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("GET /runs/{run}", s.run)
	s.mux.HandleFunc("GET /runs/{run}/samples/{key}", s.sample)
	s.mux.HandleFunc("GET /compare", s.compare)
	s.mux.HandleFunc("GET /agree", s.agreePage)
	s.mux.HandleFunc("GET /sessions", s.sessions)
	s.mux.HandleFunc("GET /sessions/{id}", s.session)
	s.mux.HandleFunc("GET /rollouts/{run}", s.rollout)
	s.mux.HandleFunc("GET /research/{run}", s.research)
	if s.o.Labels != nil {
		s.mux.HandleFunc("POST /label", s.label)
	}
}

// page is what every template gets.
type page struct {
	Title     string
	Nav       string
	Labelling bool
	Data      any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	t := s.tmpl[name]
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", page{Title: title, Nav: name, Labelling: s.o.Labels != nil, Data: data}); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "the page could not be rendered", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// statusOf maps an error to its HTTP status.
var statusOf = []struct {
	err    error
	status int
}{
	{runview.ErrNotFound, http.StatusNotFound},
	{sim.ErrNotFound, http.StatusNotFound},
	{labels.ErrInvalid, http.StatusBadRequest},
	{errBadRequest, http.StatusBadRequest},
	{errForbidden, http.StatusForbidden},
	{context.Canceled, 499},
}

var (
	errBadRequest = errors.New("bad request")
	errForbidden  = errors.New("forbidden")
)

// failErr writes err as an error page with the status its kind maps to
// (500 for anything unknown, whose detail goes to the log only when it
// is not a plain message about the input).
func (s *Server) failErr(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	for _, m := range statusOf {
		if errors.Is(err, m.err) {
			status = m.status
			break
		}
	}
	s.fail(w, r, status, err.Error(), err)
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string, cause error) {
	if status >= 500 {
		s.log.Error("ui request failed", "path", r.URL.Path, "err", cause)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = s.tmpl["error"].ExecuteTemplate(w, "layout", page{Title: fmt.Sprintf("%d %s", status, http.StatusText(status)), Nav: "error", Data: msg})
}

// token is the page's CSRF token for a label form: an HMAC of the sample
// under the server's secret, which a page of another origin cannot read.
func (s *Server) token(run, key string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("label\x00" + run + "\x00" + key))
	return hex.EncodeToString(m.Sum(nil))
}

// truthFirst decides, from a nonce, whether a Turing pair shows the real
// observation first; the page carries only the nonce, so its source stays
// hidden until the pick is submitted.
func (s *Server) truthFirst(nonce string) bool {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("order\x00" + nonce))
	return m.Sum(nil)[0]&1 == 0
}

func newNonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) labelsOf(ctx context.Context, run string) ([]agree.Label, error) {
	if s.o.Labels == nil {
		return nil, nil
	}
	ls, err := s.o.Labels.List(ctx, run)
	if err != nil {
		return nil, err
	}
	out := make([]agree.Label, len(ls))
	for i, l := range ls {
		out[i] = l.Agree()
	}
	return out, nil
}

// queryOf reads the sample filters of a request.
func queryOf(v url.Values, pageSize int) (runview.Query, error) {
	q := runview.Query{Domain: v.Get("domain"), Category: v.Get("cat"), Text: v.Get("q"), Sort: v.Get("sort"), Min: runview.NaN(), Max: runview.NaN(), Limit: pageSize}
	for _, f := range []struct {
		name string
		to   *runview.Num
	}{{"min", &q.Min}, {"max", &q.Max}} {
		if x := v.Get(f.name); x != "" {
			n, err := strconv.ParseFloat(x, 64)
			if err != nil || math.IsNaN(n) {
				return q, fmt.Errorf("%w: field %s: %q is not a number", errBadRequest, f.name, x)
			}
			*f.to = runview.Num(n)
		}
	}
	if p := v.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > math.MaxInt32 {
			return q, fmt.Errorf("%w: field page: %q is not a page number", errBadRequest, p)
		}
		q.Offset = (n - 1) * pageSize
	}
	return q, nil
}

// pager is the links of a paged list.
type pager struct {
	Page       int
	Prev, Next string
	Pages      int // 0 when unknown
}

func newPager(u *url.URL, offset, size, total int, more bool) pager {
	p := pager{Page: offset/size + 1}
	link := func(n int) string {
		v := u.Query()
		v.Set("page", strconv.Itoa(n))
		return u.Path + "?" + v.Encode()
	}
	if p.Page > 1 {
		p.Prev = link(p.Page - 1)
	}
	if total >= 0 {
		p.Pages = max(1, (total+size-1)/size)
		more = p.Page < p.Pages
	}
	if more {
		p.Next = link(p.Page + 1)
	}
	return p
}

func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// Serve serves the UI on ln until ctx ends, then lets requests in flight
// finish (a few seconds at most: pages are reads).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.guard.HTTPServer(s, s.log)
	ln = s.guard.Listen(ln)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(dctx)
	if err != nil {
		_ = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
