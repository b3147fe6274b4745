package embednats

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A config that references a variable the environment lacks is named by
// the variable; any other error keeps nats-server's words.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.conf")
	if err := os.WriteFile(missing, []byte("authorization { token: $SESSIONLOG_TEST_NO_SUCH_VAR }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ConfigFile(missing)
	if err == nil || !strings.Contains(err.Error(), "environment variable SESSIONLOG_TEST_NO_SUCH_VAR is not set") {
		t.Errorf("missing variable: %v", err)
	}
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("listen: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ConfigFile(bad); err == nil || !strings.HasPrefix(err.Error(), "--nats-config "+bad+": ") || strings.Contains(err.Error(), "environment variable") {
		t.Errorf("bad file: %v", err)
	}
	good := filepath.Join(dir, "good.conf")
	if err := os.WriteFile(good, []byte("listen: 127.0.0.1:4333\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if opts, err := ConfigFile(good); err != nil || opts.Port != 4333 {
		t.Errorf("good file: %+v %v", opts, err)
	}
}

func TestAddrs(t *testing.T) {
	for host, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "0.0.0.0": false, "10.1.2.3": false, "example.com": false} {
		if Loopback(host) != want {
			t.Errorf("Loopback(%q) = %v", host, !want)
		}
	}
	for a, want := range map[net.Addr]string{
		&net.TCPAddr{IP: net.IPv4zero, Port: 8080}:         "127.0.0.1:8080",
		&net.TCPAddr{Port: 4222}:                           "127.0.0.1:4222",
		&net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 9}: "10.0.0.5:9",
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 9}:      "[::1]:9",
		&net.UnixAddr{Name: "/run/nats.sock", Net: "unix"}: "/run/nats.sock",
	} {
		if got := DisplayAddr(a); got != want {
			t.Errorf("DisplayAddr(%v) = %q, want %q", a, got, want)
		}
	}
	for addr, want := range map[string]string{"127.0.0.1:0": "127.0.0.1 0", ":4222": " 4222", "[::1]:65535": "::1 65535",
		"h:65536": `bad port "65536"`, "h:-1": `bad port "-1"`, "h:x": `bad port "x"`, "nocolon": "missing port in address"} {
		h, p, err := SplitHostPort(addr)
		got := h + " " + strconv.Itoa(p)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) {
			t.Errorf("SplitHostPort(%q) = %q, want %q", addr, got, want)
		}
	}
}
