// SPDX-License-Identifier: Apache-2.0
// goref is the Go reference pipeline for the pprof benchmark, built from
// Debian's golang-github-google-pprof-dev: parse both profiles, subtract the
// previous one (Scale(-1) + Merge, as `go tool pprof -base` does) and write
// the gzip result. It prints per-delta CPU time, the process's peak RSS, and
// its anonymous memory before the deltas and with the last output held. With -steady the previous
// profile is parsed and negated once, before the timed loop, so that each
// delta parses only the current one, as an agent that keeps the previous
// profile parsed would. With -pairs N it keeps N pairs at once, as an agent
// with N targets would (each holding its last profile parsed), and prints
// the anonymous memory before and after, once the collector has run and
// returned what it could to the kernel (what a pair costs is the slope
// over N).
//
//	GOPATH=/usr/share/gocode GO111MODULE=off go build -o goref .
//	goref [-steady] -n 10 prev.pb.gz cur.pb.gz
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procKB reads a kB field of a /proc file: of /proc/self/status, VmHWM for
// the peak RSS (getrusage's Maxrss survives execve and would count the
// launcher's RSS) and VmRSS for the current one; of
// /proc/self/smaps_rollup, Anonymous for the anonymous memory, exact from a
// walk of the page tables (VmRSS and VmHWM come from per-CPU counters that
// may lag by tens of pages, and count code pages).
func procKB(path, field string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field+":") {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, field+":")), "%d", &kb)
			return kb
		}
	}
	return -1
}

func status(field string) int64 { return procKB("/proc/self/status", field) }

func anonKB() int64 { return procKB("/proc/self/smaps_rollup", "Anonymous") }

// negated parses a profile and scales it by -1, ready to be merged as the
// base of a delta.
func negated(data []byte) *profile.Profile {
	p, err := profile.ParseData(data)
	if err != nil {
		log.Fatal(err)
	}
	p.Scale(-1)
	return p
}

// delta parses curBytes, writes its difference from the negated previous
// profile into out (gzipped), and returns the current profile parsed.
func delta(out *bytes.Buffer, curBytes []byte, negPrev *profile.Profile) *profile.Profile {
	cur, err := profile.ParseData(curBytes)
	if err != nil {
		log.Fatal(err)
	}
	d, err := profile.Merge([]*profile.Profile{cur, negPrev})
	if err != nil {
		log.Fatal(err)
	}
	out.Reset()
	if err := d.Write(out); err != nil {
		log.Fatal(err)
	}
	return cur
}

// heldPairs keeps n pairs: each parses its previous profile, then computes
// one delta and keeps the current profile parsed, for its next delta.
func heldPairs(prevBytes, curBytes []byte, n int) {
	base := anonKB()
	held := make([]*profile.Profile, n)
	var out bytes.Buffer
	for i := range held {
		held[i] = delta(&out, curBytes, negated(prevBytes))
	}
	runtime.GC()
	debug.FreeOSMemory()
	fmt.Printf("pairs=%d base_anon_kb=%d held_anon_kb=%d\n", n, base, anonKB())
	runtime.KeepAlive(held)
}

func main() {
	n := flag.Int("n", 1, "iterations")
	steady := flag.Bool("steady", false, "parse and negate prev once, before the timed loop")
	pairs := flag.Int("pairs", 0, "keep this many pairs at once and print their memory")
	flag.Parse()
	if flag.NArg() != 2 {
		log.Fatal("usage: goref [-steady] [-n N] prev cur")
	}
	prevBytes, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	curBytes, err := os.ReadFile(flag.Arg(1))
	if err != nil {
		log.Fatal(err)
	}
	if *pairs > 0 {
		heldPairs(prevBytes, curBytes, *pairs)
		return
	}
	var outLen int
	// The runtime's own footprint, with both inputs read: what a delta adds
	// to it is the figure to compare.
	baseRSS, baseAnon := status("VmRSS"), anonKB()
	var held *profile.Profile
	if *steady {
		held = negated(prevBytes)
	}
	var out bytes.Buffer
	c0, w0 := cpu(), time.Now()
	for i := 0; i < *n; i++ {
		prev := held
		if !*steady {
			prev = negated(prevBytes)
		}
		delta(&out, curBytes, prev)
		outLen = out.Len()
	}
	c1, w1 := cpu(), time.Now()
	heldAnon := anonKB() // the output still held
	fmt.Printf("cpu_ms=%.3f wall_ms=%.3f peak_rss_kb=%d base_rss_kb=%d held_anon_kb=%d "+
		"base_anon_kb=%d out_bytes=%d\n",
		float64(c1-c0)/1e6/float64(*n), float64(w1.Sub(w0))/1e6/float64(*n), status("VmHWM"),
		baseRSS, heldAnon, baseAnon, outLen)
	runtime.KeepAlive(&out)
}
