// Command loadgen sends AdmissionReview requests to a webhook the way
// kube-apiserver does, and prints one JSON object with what it measured.
//
// The client is Go's net/http with the settings the API server's webhook
// client uses (client-go defaults): HTTP/1.1 only, at most 25 idle
// connections per host kept for 90 s, connections dialled on demand while a
// burst is waiting, full TLS handshakes (no session resumption: no
// ClientSessionCache), the server verified against the webhook's CA under its
// Service DNS name, and a 10 s timeout per call (the default timeoutSeconds).
//
// Scenarios:
//
//	keepalive  -conns N goroutines, each in a closed loop on its own kept-alive
//	           connection, for -duration (throughput).
//	bursts     every -burst-interval, -burst-size concurrent reviews through one
//	           API-server-shaped transport; -idle-per-burst extra connections per
//	           burst finish the TLS handshake and then never send a request,
//	           as the API server's surplus dials do.
//	poisson    an open-loop Poisson stream at -rate reviews/s through one
//	           API-server-shaped transport; latency counts from the scheduled
//	           arrival, so a stalled server cannot hide queueing delay.
//	idle       open -idle-conns handshaken TLS connections that never send,
//	           then -requests sequential reviews, each on a new connection.
//
// Every response is checked: HTTP 200, a JSON AdmissionReview whose response
// echoes the request's uid, allowed=true, and a JSON patch (a non-empty JSON
// array, base64 on the wire) present exactly when -expect-patch is set.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// placeholderUID is replaced in the body template by a fresh uid per request.
const placeholderUID = "00000000-0000-4000-8000-000000000000"

type options struct {
	url           string
	caFile        string
	serverName    string
	bodyFile      string
	scenario      string
	expectPatch   bool
	conns         int
	duration      time.Duration
	timeout       time.Duration
	burstSize     int
	burstInterval time.Duration
	idlePerBurst  int
	rate          float64
	idleConns     int
	requests      int
	seed          int64
	dump          string
}

type outcome int

const (
	outcomeOK outcome = iota
	outcomeError
	outcomeTimeout
)

// recorder collects per-request outcomes from many goroutines.
type recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	starts    []time.Time
	reusedAt  []bool
	ok        int
	errs      int
	timeouts  int
	samples   map[string]int
	newConns  int
	reused    int
}

func newRecorder() *recorder {
	return &recorder{samples: map[string]int{}}
}

func (r *recorder) add(start time.Time, lat time.Duration, o outcome, msg string, reused bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latencies = append(r.latencies, lat)
	r.starts = append(r.starts, start)
	r.reusedAt = append(r.reusedAt, reused)
	switch o {
	case outcomeOK:
		r.ok++
	case outcomeError:
		r.errs++
	case outcomeTimeout:
		r.timeouts++
	}
	if msg != "" && len(r.samples) < 8 {
		r.samples[msg]++
	}
	if reused {
		r.reused++
	} else {
		r.newConns++
	}
}

// Result is what loadgen prints.
type Result struct {
	Scenario          string         `json:"scenario"`
	Requests          int            `json:"requests"`
	OK                int            `json:"ok"`
	Errors            int            `json:"errors"`
	Timeouts          int            `json:"timeouts"`
	ErrorSamples      map[string]int `json:"error_samples,omitempty"`
	DurationS         float64        `json:"duration_s"`
	RPS               float64        `json:"rps"`
	MeanMs            float64        `json:"mean_ms"`
	P50Ms             float64        `json:"p50_ms"`
	P90Ms             float64        `json:"p90_ms"`
	P99Ms             float64        `json:"p99_ms"`
	MaxMs             float64        `json:"max_ms"`
	ConnsDialed       int64          `json:"conns_dialed"`
	RequestsOnNewConn int            `json:"requests_on_new_conn"`
	RequestsOnReused  int            `json:"requests_on_reused_conn"`
	IdleConnsOpened   int            `json:"idle_conns_opened"`
	IdleConnsFailed   int            `json:"idle_conns_failed"`
	TargetRate        float64        `json:"target_rate,omitempty"`
	BurstSize         int            `json:"burst_size,omitempty"`
	BurstIntervalS    float64        `json:"burst_interval_s,omitempty"`
	Conns             int            `json:"conns,omitempty"`
	BodyBytes         int            `json:"body_bytes"`
}

type generator struct {
	opt    options
	tlsCfg *tls.Config
	prefix []byte
	suffix []byte
	seq    atomic.Int64
	dials  atomic.Int64
}

func (g *generator) body() []byte {
	n := g.seq.Add(1)
	uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", rand.Uint32(), n)
	b := make([]byte, 0, len(g.prefix)+len(uid)+len(g.suffix))
	b = append(b, g.prefix...)
	b = append(b, uid...)
	b = append(b, g.suffix...)
	return b
}

func (g *generator) dialContext() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		g.dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
}

// apiserverTransport mirrors the API server's webhook client transport.
func (g *generator) apiserverTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         g.dialContext(),
		TLSClientConfig:     g.tlsCfg,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
		// A non-nil, empty map turns HTTP/2 off: HTTP/1.1 only.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
}

type reviewResponse struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   *struct {
		UID       string  `json:"uid"`
		Allowed   bool    `json:"allowed"`
		Patch     []byte  `json:"patch"`
		PatchType *string `json:"patchType"`
	} `json:"response"`
}

func uidOf(body []byte, prefixLen int) string {
	return string(body[prefixLen : prefixLen+len(placeholderUID)])
}

func (g *generator) check(status int, data []byte, uid string) string {
	if status != http.StatusOK {
		snippet := data
		if len(snippet) > 120 {
			snippet = snippet[:120]
		}
		return fmt.Sprintf("HTTP %d: %s", status, snippet)
	}
	var rr reviewResponse
	if err := json.Unmarshal(data, &rr); err != nil {
		return "bad JSON: " + err.Error()
	}
	if rr.Kind != "AdmissionReview" || rr.Response == nil {
		return "not an AdmissionReview response"
	}
	if rr.Response.UID != uid {
		return "uid not echoed"
	}
	if !rr.Response.Allowed {
		return "not allowed"
	}
	if g.opt.expectPatch {
		if len(rr.Response.Patch) == 0 {
			return "patch missing"
		}
		if rr.Response.PatchType == nil || *rr.Response.PatchType != "JSONPatch" {
			return "patchType is not JSONPatch"
		}
		var ops []map[string]any
		if err := json.Unmarshal(rr.Response.Patch, &ops); err != nil || len(ops) == 0 {
			return "patch is not a non-empty JSON array"
		}
	} else if len(rr.Response.Patch) != 0 {
		return "unexpected patch"
	}
	return ""
}

// review sends one review; start is when the request was due (for the
// open-loop scenario, earlier than now when the generator fell behind).
func (g *generator) review(client *http.Client, rec *recorder, start time.Time) {
	body := g.body()
	uid := uidOf(body, len(g.prefix))
	reused := false
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
		http.MethodPost, g.opt.url, bytes.NewReader(body))
	if err != nil {
		rec.add(start, time.Since(start), outcomeError, err.Error(), false)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	req.Header.Set("User-Agent", "kube-apiserver-admission")
	resp, err := client.Do(req)
	if err != nil {
		lat := time.Since(start)
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			rec.add(start, lat, outcomeTimeout, "timeout", reused)
		} else {
			rec.add(start, lat, outcomeError, err.Error(), reused)
		}
		return
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	lat := time.Since(start)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			rec.add(start, lat, outcomeTimeout, "timeout reading body", reused)
		} else {
			rec.add(start, lat, outcomeError, "reading body: "+err.Error(), reused)
		}
		return
	}
	if msg := g.check(resp.StatusCode, data, uid); msg != "" {
		rec.add(start, lat, outcomeError, msg, reused)
		return
	}
	rec.add(start, lat, outcomeOK, "", reused)
}

func (g *generator) runKeepalive(rec *recorder) time.Duration {
	t := g.apiserverTransport()
	t.MaxIdleConnsPerHost = g.opt.conns
	t.MaxConnsPerHost = g.opt.conns
	client := &http.Client{Transport: t, Timeout: g.opt.timeout}
	defer t.CloseIdleConnections()
	begin := time.Now()
	deadline := begin.Add(g.opt.duration)
	var wg sync.WaitGroup
	for i := 0; i < g.opt.conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				g.review(client, rec, time.Now())
			}
		}()
	}
	wg.Wait()
	return time.Since(begin)
}

// openIdle dials n connections at once that complete the TLS handshake and
// then send nothing. A handshake the server has not finished within 5 s counts
// as failed. The caller closes the connections it gets.
func (g *generator) openIdle(n int) (conns []net.Conn, failed int) {
	host := hostOf(g.opt.url)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &net.Dialer{Timeout: 5 * time.Second}
			c, err := tls.DialWithDialer(d, "tcp", host, g.tlsCfg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			conns = append(conns, c)
		}()
	}
	wg.Wait()
	return conns, failed
}

func hostOf(rawURL string) string {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		fail(err)
	}
	return req.URL.Host
}

func (g *generator) runBursts(rec *recorder, res *Result) time.Duration {
	t := g.apiserverTransport()
	client := &http.Client{Transport: t, Timeout: g.opt.timeout}
	defer t.CloseIdleConnections()
	var idle []net.Conn
	var idleMu sync.Mutex
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	begin := time.Now()
	var wg sync.WaitGroup
	for k := 0; ; k++ {
		at := begin.Add(time.Duration(k) * g.opt.burstInterval)
		if at.Sub(begin) >= g.opt.duration {
			break
		}
		time.Sleep(time.Until(at))
		for i := 0; i < g.opt.burstSize; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.review(client, rec, time.Now())
			}()
		}
		if g.opt.idlePerBurst > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs, failed := g.openIdle(g.opt.idlePerBurst)
				idleMu.Lock()
				idle = append(idle, cs...)
				res.IdleConnsOpened += len(cs)
				res.IdleConnsFailed += failed
				idleMu.Unlock()
			}()
		}
	}
	wg.Wait()
	return time.Since(begin)
}

func (g *generator) runPoisson(rec *recorder) time.Duration {
	t := g.apiserverTransport()
	client := &http.Client{Transport: t, Timeout: g.opt.timeout}
	defer t.CloseIdleConnections()
	rng := rand.New(rand.NewSource(g.opt.seed))
	begin := time.Now()
	var wg sync.WaitGroup
	next := begin
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / g.opt.rate * float64(time.Second)))
		if next.Sub(begin) >= g.opt.duration {
			break
		}
		time.Sleep(time.Until(next))
		wg.Add(1)
		go func(due time.Time) {
			defer wg.Done()
			g.review(client, rec, due)
		}(next)
	}
	wg.Wait()
	return time.Since(begin)
}

func (g *generator) runIdle(rec *recorder, res *Result) time.Duration {
	idle, failed := g.openIdle(g.opt.idleConns)
	res.IdleConnsOpened = len(idle)
	res.IdleConnsFailed = failed
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	t := g.apiserverTransport()
	t.DisableKeepAlives = true
	client := &http.Client{Transport: t, Timeout: g.opt.timeout}
	begin := time.Now()
	for i := 0; i < g.opt.requests; i++ {
		g.review(client, rec, time.Now())
	}
	return time.Since(begin)
}

func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	idx := int(math.Ceil(q*float64(len(sorted)))) - 1
	if idx < 0 {
		idx = 0
	}
	return float64(sorted[idx]) / float64(time.Millisecond)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "", "webhook URL, e.g. https://127.0.0.1:8443/mutate?timeout=10s")
	flag.StringVar(&o.caFile, "ca", "", "PEM file of the CA that signed the server certificate")
	flag.StringVar(&o.serverName, "servername", "netqos-webhook.netqos-system.svc", "name to verify the server certificate against")
	flag.StringVar(&o.bodyFile, "body", "", "AdmissionReview JSON whose request.uid is "+placeholderUID)
	flag.StringVar(&o.scenario, "scenario", "keepalive", "keepalive | bursts | poisson | idle")
	flag.BoolVar(&o.expectPatch, "expect-patch", true, "whether every response must carry a JSON patch")
	flag.IntVar(&o.conns, "conns", 16, "keepalive: concurrent kept-alive connections")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long to send")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout (the API server's default timeoutSeconds)")
	flag.IntVar(&o.burstSize, "burst-size", 10, "bursts: concurrent reviews per burst")
	flag.DurationVar(&o.burstInterval, "burst-interval", 3*time.Second, "bursts: time between bursts")
	flag.IntVar(&o.idlePerBurst, "idle-per-burst", 2, "bursts: handshaken connections per burst that never send")
	flag.Float64Var(&o.rate, "rate", 200, "poisson: mean reviews per second")
	flag.IntVar(&o.idleConns, "idle-conns", 50, "idle: handshaken connections held open without a request")
	flag.IntVar(&o.requests, "requests", 20, "idle: sequential reviews sent while the idle connections are open")
	flag.Int64Var(&o.seed, "seed", 1, "poisson: random seed for the arrival times")
	flag.StringVar(&o.dump, "dump", "", "write every request's start offset (ms), latency (ms) and connection reuse to this file")
	flag.Parse()
	if o.url == "" || o.caFile == "" || o.bodyFile == "" {
		fail(errors.New("-url, -ca and -body are required"))
	}

	caPEM, err := os.ReadFile(o.caFile)
	if err != nil {
		fail(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		fail(fmt.Errorf("no certificate in %s", o.caFile))
	}
	body, err := os.ReadFile(o.bodyFile)
	if err != nil {
		fail(err)
	}
	i := bytes.Index(body, []byte(placeholderUID))
	if i < 0 {
		fail(fmt.Errorf("%s does not contain the placeholder uid %s", o.bodyFile, placeholderUID))
	}
	g := &generator{
		opt: o,
		tlsCfg: &tls.Config{
			RootCAs:    pool,
			ServerName: o.serverName,
			MinVersion: tls.VersionTLS12,
			// No ClientSessionCache: every new connection is a full handshake.
		},
		prefix: body[:i],
		suffix: body[i+len(placeholderUID):],
	}

	rec := newRecorder()
	res := &Result{Scenario: o.scenario, BodyBytes: len(body)}
	var elapsed time.Duration
	switch o.scenario {
	case "keepalive":
		res.Conns = o.conns
		elapsed = g.runKeepalive(rec)
	case "bursts":
		res.BurstSize = o.burstSize
		res.BurstIntervalS = o.burstInterval.Seconds()
		elapsed = g.runBursts(rec, res)
	case "poisson":
		res.TargetRate = o.rate
		elapsed = g.runPoisson(rec)
	case "idle":
		elapsed = g.runIdle(rec, res)
	default:
		fail(fmt.Errorf("unknown scenario %q", o.scenario))
	}

	if o.dump != "" {
		dumpRequests(o.dump, rec)
	}
	sort.Slice(rec.latencies, func(a, b int) bool { return rec.latencies[a] < rec.latencies[b] })
	var sum time.Duration
	for _, l := range rec.latencies {
		sum += l
	}
	n := len(rec.latencies)
	res.Requests = n
	res.OK = rec.ok
	res.Errors = rec.errs
	res.Timeouts = rec.timeouts
	if len(rec.samples) > 0 {
		res.ErrorSamples = rec.samples
	}
	res.DurationS = elapsed.Seconds()
	if elapsed > 0 {
		res.RPS = float64(rec.ok) / elapsed.Seconds()
	}
	if n > 0 {
		res.MeanMs = float64(sum) / float64(n) / float64(time.Millisecond)
	}
	res.P50Ms = percentile(rec.latencies, 0.50)
	res.P90Ms = percentile(rec.latencies, 0.90)
	res.P99Ms = percentile(rec.latencies, 0.99)
	if n > 0 {
		res.MaxMs = float64(rec.latencies[n-1]) / float64(time.Millisecond)
	}
	res.ConnsDialed = g.dials.Load()
	res.RequestsOnNewConn = rec.newConns
	res.RequestsOnReused = rec.reused
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		fail(err)
	}
}

func dumpRequests(path string, rec *recorder) {
	f, err := os.Create(path)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	if len(rec.starts) == 0 {
		return
	}
	first := rec.starts[0]
	for _, t := range rec.starts {
		if t.Before(first) {
			first = t
		}
	}
	for i, t := range rec.starts {
		fmt.Fprintf(f, "%.3f %.3f %t\n", float64(t.Sub(first))/1e6, float64(rec.latencies[i])/1e6, rec.reusedAt[i])
	}
}
