// SPDX-License-Identifier: Apache-2.0
// deltaprof is a test fixture that serves godeltaprof-style profiles:
// /debug/pprof/delta_heap, /debug/pprof/delta_mutex and /debug/pprof/delta_block
// return gzip pprof holding only what changed since the previous call of the
// same endpoint (process-global state, like grafana/pyroscope-go/godeltaprof;
// the first call returns everything since start). Built from the standard
// library's runtime.MemProfile, MutexProfile and BlockProfile records:
//
//   - heap: key (stack PCs, block size); alloc_* are deltas of the raw
//     counts, scaled afterwards with Go's heap sampling formula; inuse_* are
//     current absolute values; a numeric `bytes` label carries the block size;
//     keys whose delta is negative are skipped and keep their old reference.
//   - mutex/block: key = stack PCs; contentions and delay (cycles -> ns, and
//     the mutex fraction for mutex) are deltas; negative or all-zero skipped.
//
// For the tests it can also produce known load on request:
// /alloc?n=N&size=S allocates N objects of S bytes in main.fixtureAlloc,
// /block?n=N blocks N times on a channel receive in main.fixtureBlock,
// /contend?n=N makes N contended Lock calls in main.fixtureContend.
// net/http/pprof's cumulative endpoints are also served.
//
// Standard library only: build with GO111MODULE=off go build.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "unsafe" // for go:linkname
)

//go:linkname runtimeCyclesPerSecond runtime/pprof.runtime_cyclesPerSecond
func runtimeCyclesPerSecond() int64

// ---- minimal protobuf writer for profile.proto ----

type pbuf struct{ b []byte }

func (p *pbuf) varint(x uint64) {
	for x >= 0x80 {
		p.b = append(p.b, byte(x)|0x80)
		x >>= 7
	}
	p.b = append(p.b, byte(x))
}

func (p *pbuf) uint(field int, x uint64) {
	if x == 0 {
		return
	}
	p.varint(uint64(field) << 3)
	p.varint(x)
}

func (p *pbuf) int(field int, x int64) { p.uint(field, uint64(x)) }

func (p *pbuf) bytes(field int, b []byte) {
	p.varint(uint64(field)<<3 | 2)
	p.varint(uint64(len(b)))
	p.b = append(p.b, b...)
}

func (p *pbuf) packed(field int, xs []uint64) {
	var q pbuf
	for _, x := range xs {
		q.varint(x)
	}
	p.bytes(field, q.b)
}

type function struct{ name, file int64 }

type builder struct {
	out       pbuf
	strings   map[string]int64
	strs      []string
	locs      map[uintptr]uint64
	locBytes  [][]byte
	funcs     map[function]uint64
	funcBytes [][]byte
}

func newBuilder(cols [][2]string, periodType [2]string, period int64) *builder {
	b := &builder{strings: map[string]int64{}, locs: map[uintptr]uint64{},
		funcs: map[function]uint64{}}
	b.str("")
	for _, c := range cols {
		var vt pbuf
		vt.int(1, b.str(c[0]))
		vt.int(2, b.str(c[1]))
		b.out.bytes(1, vt.b)
	}
	var pt pbuf
	pt.int(1, b.str(periodType[0]))
	pt.int(2, b.str(periodType[1]))
	b.out.bytes(11, pt.b)
	b.out.int(12, period)
	return b
}

func (b *builder) str(s string) int64 {
	if i, ok := b.strings[s]; ok {
		return i
	}
	i := int64(len(b.strs))
	b.strs = append(b.strs, s)
	b.strings[s] = i
	return i
}

func (b *builder) function(name, file string) uint64 {
	k := function{b.str(name), b.str(file)}
	if id, ok := b.funcs[k]; ok {
		return id
	}
	id := uint64(len(b.funcBytes) + 1)
	var f pbuf
	f.uint(1, id)
	f.int(2, k.name)
	f.int(3, k.name)
	f.int(4, k.file)
	b.funcBytes = append(b.funcBytes, f.b)
	b.funcs[k] = id
	return id
}

// location returns the id of the location of return address pc, with its
// inlined frames as lines (innermost first, as pprof wants).
func (b *builder) location(pc uintptr) uint64 {
	if id, ok := b.locs[pc]; ok {
		return id
	}
	id := uint64(len(b.locBytes) + 1)
	var l pbuf
	l.uint(1, id)
	l.uint(3, uint64(pc))
	frames := runtime.CallersFrames([]uintptr{pc})
	for {
		fr, more := frames.Next()
		if fr.Function != "" {
			var ln pbuf
			ln.uint(1, b.function(fr.Function, fr.File))
			ln.int(2, int64(fr.Line))
			l.bytes(4, ln.b)
		}
		if !more {
			break
		}
	}
	b.locBytes = append(b.locBytes, l.b)
	b.locs[pc] = id
	return id
}

func (b *builder) sample(stk []uintptr, values []int64, bytesLabel int64) {
	var s pbuf
	ids := make([]uint64, 0, len(stk))
	for _, pc := range stk {
		ids = append(ids, b.location(pc))
	}
	s.packed(1, ids)
	vs := make([]uint64, len(values))
	for i, v := range values {
		vs[i] = uint64(v)
	}
	s.packed(2, vs)
	if bytesLabel != 0 {
		var lb pbuf
		lb.int(1, b.str("bytes"))
		lb.int(3, bytesLabel)
		s.bytes(3, lb.b)
	}
	b.out.bytes(2, s.b)
}

func (b *builder) finish() []byte {
	for _, l := range b.locBytes {
		b.out.bytes(4, l)
	}
	for _, f := range b.funcBytes {
		b.out.bytes(5, f)
	}
	for _, s := range b.strs {
		b.out.bytes(6, []byte(s))
	}
	b.out.int(9, time.Now().UnixNano())
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(b.out.b)
	w.Close()
	return gz.Bytes()
}

// ---- delta state ----

type heapKey struct {
	stk  string // the PCs, as bytes
	size int64
}

type heapPrev struct{ objs, bytes int64 }

var (
	heapMu    sync.Mutex
	heapState = map[heapKey]heapPrev{}
	cntMu     sync.Mutex
	cntState  = map[string]map[string][2]int64{"mutex": {}, "block": {}}
)

func stackKey(stk []uintptr) string {
	var sb strings.Builder
	for _, pc := range stk {
		sb.WriteString(strconv.FormatUint(uint64(pc), 16))
		sb.WriteByte(',')
	}
	return sb.String()
}

// scaleHeapSample is Go's (runtime/pprof/protomem.go) unsampling formula.
func scaleHeapSample(count, size, rate int64) (int64, int64) {
	if count == 0 || size == 0 {
		return 0, 0
	}
	if rate <= 1 {
		return count, size
	}
	avgSize := float64(size) / float64(count)
	scale := 1 / (1 - math.Exp(-avgSize/float64(rate)))
	return int64(float64(count) * scale), int64(float64(size) * scale)
}

func deltaHeap(w http.ResponseWriter, r *http.Request) {
	if r.FormValue("gc") == "1" {
		runtime.GC()
	}
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	rate := int64(runtime.MemProfileRate)
	b := newBuilder([][2]string{{"alloc_objects", "count"}, {"alloc_space", "bytes"},
		{"inuse_objects", "count"}, {"inuse_space", "bytes"}}, [2]string{"space", "bytes"}, rate)

	// Accumulate duplicates first, as godeltaprof's profMap does.
	type acc struct {
		stk                       []uintptr
		alloc, allocB, inuse, inB int64
	}
	order := []heapKey{}
	cur := map[heapKey]*acc{}
	for i := range recs {
		rec := &recs[i]
		size := int64(0)
		if rec.AllocObjects > 0 {
			size = rec.AllocBytes / rec.AllocObjects
		}
		k := heapKey{stackKey(rec.Stack()), size}
		a := cur[k]
		if a == nil {
			a = &acc{stk: rec.Stack()}
			cur[k] = a
			order = append(order, k)
		}
		a.alloc += rec.AllocObjects
		a.allocB += rec.AllocBytes
		a.inuse += rec.InUseObjects()
		a.inB += rec.InUseBytes()
	}
	heapMu.Lock()
	for _, k := range order {
		a := cur[k]
		prev := heapState[k]
		dObj, dBytes := a.alloc-prev.objs, a.allocB-prev.bytes
		if dObj < 0 || dBytes < 0 {
			continue
		}
		heapState[k] = heapPrev{a.alloc, a.allocB}
		if dObj == 0 && dBytes == 0 && a.inuse == 0 && a.inB == 0 {
			continue
		}
		ao, ab := scaleHeapSample(dObj, dBytes, rate)
		io, ib := scaleHeapSample(a.inuse, a.inB, rate)
		b.sample(a.stk, []int64{ao, ab, io, ib}, k.size)
	}
	heapMu.Unlock()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b.finish())
}

func deltaCount(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fetch := runtime.BlockProfile
		if name == "mutex" {
			fetch = runtime.MutexProfile
		}
		var recs []runtime.BlockProfileRecord
		n, _ := fetch(nil)
		for {
			recs = make([]runtime.BlockProfileRecord, n+50)
			var ok bool
			if n, ok = fetch(recs); ok {
				recs = recs[:n]
				break
			}
		}
		cpuGHz := float64(runtimeCyclesPerSecond()) / 1e9
		period := int64(1)
		if name == "mutex" {
			period = int64(runtime.SetMutexProfileFraction(-1))
		}
		b := newBuilder([][2]string{{"contentions", "count"}, {"delay", "nanoseconds"}},
			[2]string{"contentions", "count"}, 1)
		type acc struct {
			stk           []uintptr
			count, cycles int64
		}
		order := []string{}
		cur := map[string]*acc{}
		for i := range recs {
			k := stackKey(recs[i].Stack())
			a := cur[k]
			if a == nil {
				a = &acc{stk: recs[i].Stack()}
				cur[k] = a
				order = append(order, k)
			}
			a.count += recs[i].Count
			a.cycles += recs[i].Cycles
		}
		cntMu.Lock()
		state := cntState[name]
		for _, k := range order {
			a := cur[k]
			prev := state[k]
			dc, dy := a.count-prev[0], a.cycles-prev[1]
			if dc < 0 || dy < 0 || (dc == 0 && dy == 0) {
				continue
			}
			state[k] = [2]int64{a.count, a.cycles}
			b.sample(a.stk, []int64{dc * period, int64(float64(dy) / cpuGHz * float64(period))}, 0)
		}
		cntMu.Unlock()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b.finish())
	}
}

// ---- load on request ----

var keep [][]byte

//go:noinline
func fixtureAlloc(n, size int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, size))
	}
	keep = keep[:0]
}

//go:noinline
func fixtureBlock(n int) {
	ch := make(chan int)
	go func() {
		for i := 0; i < n; i++ {
			time.Sleep(time.Millisecond)
			ch <- i
		}
	}()
	for i := 0; i < n; i++ {
		<-ch
	}
}

//go:noinline
func fixtureContend(n int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				mu.Lock()
				time.Sleep(50 * time.Microsecond)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func intParam(r *http.Request, name string, def int) int {
	if v, err := strconv.Atoi(r.FormValue(name)); err == nil && v > 0 && v <= 1000000 {
		return v
	}
	return def
}

func backgroundLoad() {
	go func() {
		for {
			fixtureAlloc(100, 1024)
			time.Sleep(time.Millisecond)
		}
	}()
	go func() {
		for {
			fixtureContend(20)
		}
	}()
	go func() {
		for {
			fixtureBlock(20)
		}
	}()
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6060", "listen address (port 0 picks one)")
	portFile := flag.String("port-file", "", "write the bound port to this file")
	load := flag.Bool("load", true, "run background allocation, mutex and block load")
	memRate := flag.Int("mem-rate", 512*1024, "runtime.MemProfileRate")
	mutexFraction := flag.Int("mutex-fraction", 5, "runtime.SetMutexProfileFraction")
	blockRate := flag.Int("block-rate", 10000, "runtime.SetBlockProfileRate (ns)")
	flag.Parse()

	runtime.MemProfileRate = *memRate
	runtime.SetMutexProfileFraction(*mutexFraction)
	runtime.SetBlockProfileRate(*blockRate)

	http.HandleFunc("/debug/pprof/delta_heap", deltaHeap)
	http.HandleFunc("/debug/pprof/delta_mutex", deltaCount("mutex"))
	http.HandleFunc("/debug/pprof/delta_block", deltaCount("block"))
	http.HandleFunc("/alloc", func(w http.ResponseWriter, r *http.Request) {
		fixtureAlloc(intParam(r, "n", 1000), intParam(r, "size", 4096))
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		fixtureBlock(intParam(r, "n", 10))
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/contend", func(w http.ResponseWriter, r *http.Request) {
		fixtureContend(intParam(r, "n", 10))
		fmt.Fprintln(w, "ok")
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *portFile != "" {
		tmp := *portFile + ".tmp"
		port := ln.Addr().(*net.TCPAddr).Port
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d\n", port)), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *portFile); err != nil {
			log.Fatal(err)
		}
	}
	if *load {
		backgroundLoad()
	}
	log.Printf("deltaprof listening on %s", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}
