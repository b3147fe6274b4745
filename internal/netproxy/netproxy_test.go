package netproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/netproxy"
)

// echo serves a line echo on loopback.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, wait time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestPauseResume(t *testing.T) {
	p, err := netproxy.New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "one", 2*time.Second); err != nil || got != "one\n" {
		t.Fatalf("before pause: %q, %v", got, err)
	}
	p.Pause()
	// A black hole: the write succeeds, no answer comes, the connection stays.
	if got, err := roundTrip(c, r, "two", 300*time.Millisecond); err == nil {
		t.Fatalf("paused proxy forwarded %q", got)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("paused proxy: want a timeout, got %v", err)
	}
	// New connections are refused while paused.
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		c2.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c2.Read(make([]byte, 1)); err == nil {
			t.Fatal("paused proxy accepted a connection")
		}
		c2.Close()
	}
	p.Resume()
	// The connection that lived through the pause is closed on resume.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("stale connection survived the pause")
	}
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, bufio.NewReader(c3), "three", 2*time.Second); err != nil || got != "three\n" {
		t.Fatalf("after resume: %q, %v", got, err)
	}
}
