package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// TestMain lets the test binary be what bench is to -rpc: the shim
// into a host, and the server or the client of a measurement.
func TestMain(m *testing.M) {
	nethost.EnterMain()
	rpcWorkerMain()
	collTestWorker()
	peerTestWorker()
	os.Exit(m.Run())
}

// rpcTestOptions are the options of a short -rpc run.
func rpcTestOptions(where string) options {
	return options{max: defaultMax, format: "table", transport: "shm", runs: 1, mtu: 9000,
		rpcOptions: rpcOptions{rpc: where, rpcKind: "tcp", sizes: "64,4096", rpcN: 200, warm: 20}}
}

// testPlace returns a place for -rpc's processes that writes their stderr
// to the test's log. Built with -race, the processes exit without the
// race detector's second of sleep.
func testPlace(t *testing.T, o options) *rpcPlace {
	t.Helper()
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	c := benchCPUs(t)
	pl, err := newRPCPlace(o, [][]int{c[:1], c[1:2]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.close)
	pl.stderr = logWriter{t}
	return pl
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestRPCHost runs -rpc host -compare briefly, tcp against grpc, quiet
// and under a small load: two processes of each pass, every figure there
// and in order, the lines -format anchor prints parse back to the same
// figures, and the table has its ratios.
func TestRPCHost(t *testing.T) {
	o := rpcTestOptions("host")
	o.compare, o.gcLoad = true, 0.2
	if err := o.checkRPC(); err != nil {
		t.Fatal(err)
	}
	pl := testPlace(t, o)
	res, anchors, err := pl.runs(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(anchors) != 1 || anchors["grpc"] == nil {
		t.Fatalf("anchors %v, want grpc's", anchors)
	}
	for kind, r := range map[string][]Result{"tcp": res, "grpc": anchors["grpc"]} {
		s := index(r)
		for _, pre := range []string{"rpc_", "rpcgc_"} {
			for _, size := range []int{64, 4096} {
				p50, p99, p999 := s[pre+"p50"][size], s[pre+"p99"][size], s[pre+"p999"][size]
				if !(p50 > 0 && p50 <= p99 && p99 <= p999) {
					t.Errorf("%s %s %d B: p50 %v, p99 %v, p999 %v", kind, pre, size, p50, p99, p999)
				}
			}
		}
		for _, who := range []string{"client", "server"} {
			if v := s["gcload_"+who+"_gbps"][0]; !(v > 0) {
				t.Errorf("%s: the %s's allocation rate under load is %v", kind, who, v)
			}
		}
	}
	var b bytes.Buffer
	o.format = "anchor"
	if err := reportRPC(&b, o, res, anchors, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "rpc 64 ") || !strings.Contains(b.String(), "\n# grpc\nrpc 64 ") {
		t.Fatalf("anchor lines:\n%s", b.String())
	}
	back, backAnchors, err := parseRPCAnchor(&b)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b []Result) bool {
		return slices.EqualFunc(a, b, func(x, y Result) bool {
			return x.Kind == y.Kind && x.Size == y.Size && x.Value-y.Value < 0.06 && y.Value-x.Value < 0.06
		})
	}
	sortRes := func(r []Result) []Result {
		r = slices.Clone(r)
		slices.SortFunc(r, func(x, y Result) int { return cmp.Or(strings.Compare(x.Kind, y.Kind), cmp.Compare(x.Size, y.Size)) })
		return r
	}
	if !near(sortRes(back), sortRes(res)) || !near(sortRes(backAnchors["grpc"]), sortRes(anchors["grpc"])) {
		t.Fatalf("anchor lines parsed back as\n%v\n%v\nwant\n%v\n%v", back, backAnchors, res, anchors)
	}
	b.Reset()
	o.format = "table"
	reportRPC(&b, o, res, anchors, "")
	for _, want := range []string{"p50 round trip", "p999 round trip", "size  tcp  grpc  ratio", "x quiet", "4 KiB", "client 0.", "collections/s"} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRPCBadReply: a server that answers one request wrongly (a changed
// byte, a byte short or over, the previous request's reply) stops the
// client at that request with an error that says what was wrong.
func TestRPCBadReply(t *testing.T) {
	o := rpcTestOptions("host")
	o.sizes, o.rpcN, o.warm = "64", 20, 5
	for _, tc := range []struct{ kind, fault, want string }{
		{"tcp", "corrupt:12", "request 13 (64 B): wrong reply: 0x"},
		{"tcp", "short:12", "request 13 (64 B): wrong reply: 63 bytes, want 64"},
		{"tcp", "long:12", "request 13 (64 B): wrong reply: 65 bytes, want 64"},
		{"tcp", "stale:12", "request 13 (64 B): wrong reply: it carries sequence number 12"},
		{"grpc", "corrupt:3", "request 4 (64 B): wrong reply: 0x"},
		{"grpc", "stale:3", "request 4 (64 B): wrong reply: it carries sequence number 3"},
	} {
		t.Run(tc.kind+"/"+tc.fault, func(t *testing.T) {
			o.rpcKind = tc.kind
			pl := testPlace(t, o)
			pl.fault = tc.fault
			_, err := pl.pass(context.Background(), o, tc.kind, []int{64}, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a wrong reply: %q", err, tc.want)
			}
		})
	}
}

// TestRPCNamespaces runs -rpc udp briefly over tcp: the server in one
// host, the client in the other, connected by the server's address in
// 198.18.0.0/15.
func TestRPCNamespaces(t *testing.T) {
	if err := nethost.Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
	o := rpcTestOptions("udp")
	o.sizes = "64"
	if err := o.checkRPC(); err != nil {
		t.Fatal(err)
	}
	pl := testPlace(t, o)
	if addr, _ := pl.addr(); !strings.HasPrefix(addr, "198.18.") {
		t.Fatalf("server address %s, want one of the hosts'", addr)
	}
	res, err := pl.pass(context.Background(), o, "tcp", []int{64}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := index(res); !(s["rpc_p50"][64] > 0 && s["rpc_p999"][64] >= s["rpc_p50"][64]) {
		t.Fatalf("figures %v", res)
	}
}

// TestRPCOptions: -rpc's flags are checked, and the job benchmark's
// flags are refused with it.
func TestRPCOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*options)
		ok   bool
	}{
		{"defaults", func(*options) {}, true},
		{"where", func(o *options) { o.rpc = "lan" }, false},
		{"kind", func(o *options) { o.rpcKind = "carrier-pigeon" }, false},
		{"grpc", func(o *options) { o.rpcKind = "grpc" }, true},
		{"sizes", func(o *options) { o.sizes = "8,1048576" }, true},
		{"small", func(o *options) { o.sizes = "4" }, false},
		{"large", func(o *options) { o.sizes = "2097152" }, false},
		{"twice", func(o *options) { o.sizes = "64,64" }, false},
		{"junk", func(o *options) { o.sizes = "64,x" }, false},
		{"n", func(o *options) { o.rpcN = 0 }, false},
		{"warm", func(o *options) { o.warm = -1 }, false},
		{"load", func(o *options) { o.gcLoad = -1 }, false},
		{"max", func(o *options) { o.max = 64 }, false},
		{"net", func(o *options) { o.net = "xdp" }, false},
		{"phases", func(o *options) { o.phases = true }, false},
		{"format", func(o *options) { o.format = "csv" }, false},
		{"runs", func(o *options) { o.runs = 3 }, true},
		{"profile runs", func(o *options) { o.runs, o.profile = 3, "p" }, false},
	} {
		o := rpcTestOptions("host")
		tc.set(&o)
		if err := o.check(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	o := rpcTestOptions("host")
	o.rpcKind = ""
	if got, want := o.kind(), defaultRPCKind(); got != want || (lookupRPC(tachyonKind) == nil) != (want == "tcp") {
		t.Fatalf("default kind %q, want %q", got, want)
	}
	o.compare = true
	if got := o.rpcKindsToRun(); got[0] != o.kind() || len(got) != 1+len(rpcAnchorKinds)-btoi(slices.Contains(rpcAnchorKinds, o.kind())) {
		t.Fatalf("kinds to run %v", got)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCheckReply: the reply is the request, or the error says what
// differs.
func TestCheckReply(t *testing.T) {
	req := make([]byte, 64)
	fillRequest(req, 7)
	other := make([]byte, 64)
	fillRequest(other, 8)
	if bytes.Equal(req[8:], other[8:]) {
		t.Fatal("two requests' bytes alike")
	}
	if err := checkReply(req, slices.Clone(req)); err != nil {
		t.Fatal(err)
	}
	flipped := slices.Clone(req)
	flipped[40] ^= 1
	for _, tc := range []struct {
		rep  []byte
		want string
	}{
		{other, "carries sequence number 8"},
		{req[:63], "63 bytes, want 64"},
		{append(slices.Clone(req), 1), "65 bytes"},
		{req[:3], "3 bytes"},
		{nil, "0 bytes"},
		{flipped, "at byte 40"},
	} {
		err := checkReply(req, tc.rep)
		if !errors.Is(err, errBadReply) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reply of %d bytes: %v, want %q", len(tc.rep), err, tc.want)
		}
	}
	odd := make([]byte, 13)
	fillRequest(odd, 9)
	if odd[12] == 0 && odd[11] == 0 && odd[10] == 0 {
		t.Fatal("the tail of a request not filled")
	}
}

// TestPercentile: the nearest rank.
func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	for _, tc := range []struct{ p, want float64 }{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := percentile(d, tc.p); got != tc.want {
			t.Errorf("p%v: %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(d[:1], 0.999); got != 1 {
		t.Errorf("of one: %v", got)
	}
}

// TestFault: the fault modes parse, and bad ones do not.
func TestFault(t *testing.T) {
	for _, s := range []string{"corrupt", "short:x", "late:3", "stale:-1"} {
		if _, err := parseFault(s); err == nil {
			t.Errorf("fault %q accepted", s)
		}
	}
	f, err := parseFault("stale:1")
	if err != nil {
		t.Fatal(err)
	}
	h := f.handler()
	a, b := []byte("first-request"), []byte("second-request")
	if got := h(nil, a); !bytes.Equal(got, a) {
		t.Fatalf("request 0: %q", got)
	}
	if got := h(nil, b); !bytes.Equal(got, a) {
		t.Fatalf("request 1: %q, want the stale %q", got, a)
	}
	if got := h(nil, b); !bytes.Equal(got, b) {
		t.Fatalf("request 2: %q", got)
	}
}

// TestGCLoad: the load allocates at about the rate asked, no faster.
func TestGCLoad(t *testing.T) {
	const rate = 0.2e9
	l := startGCLoad(rate)
	time.Sleep(300 * time.Millisecond)
	gbps, _ := l.stop()
	if gbps < 0.05 || gbps > 0.3 {
		t.Fatalf("allocated %.3f GB/s, asked %.1f", gbps, rate/1e9)
	}
}
