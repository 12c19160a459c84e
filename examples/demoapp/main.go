// SPDX-License-Identifier: Apache-2.0
// demoapp is a small Go service for proflet's demo and tests: it exposes the
// standard library's net/http/pprof endpoints and keeps a steady CPU,
// allocation, mutex-contention and blocking load so that every default
// profile type has something to show. Standard library only (GO111MODULE=off).
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"
)

var sink [][]byte

// burnCPU hashes in a loop: the CPU profile's hot path. Each round runs
// under pprof labels, as a traced request handler would: a handler that
// stays and a span_id that changes every round, so label filters have
// something to merge.
func burnCPU(stop <-chan struct{}) {
	buf := make([]byte, 4096)
	for round := 0; ; round++ {
		select {
		case <-stop:
			return
		default:
		}
		labels := pprof.Labels("handler", "/checkout", "span_id", strconv.Itoa(round%16))
		pprof.Do(context.Background(), labels, func(context.Context) {
			for i := 0; i < 200; i++ {
				sum := sha256.Sum256(buf)
				buf[0] = sum[0]
			}
		})
		time.Sleep(2 * time.Millisecond)
	}
}

// parkLabelled keeps a few goroutines waiting under labels: the
// goroutine profile carries them.
func parkLabelled(stop <-chan struct{}) {
	for i := 0; i < 4; i++ {
		labels := pprof.Labels("handler", "/idle", "span_id", strconv.Itoa(i))
		go pprof.Do(context.Background(), labels, func(context.Context) { <-stop })
	}
}

// allocate keeps a rolling window of live buffers: alloc_* grows, inuse_* stays bounded.
func allocate(stop <-chan struct{}) {
	var mu sync.Mutex
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		b := make([]byte, 1024+(i%16)*512)
		mu.Lock()
		sink = append(sink, b)
		if len(sink) > 2048 {
			sink = sink[1024:]
		}
		mu.Unlock()
		if i%64 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// contend makes goroutines fight over one mutex: the mutex profile.
func contend(stop <-chan struct{}) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				time.Sleep(100 * time.Microsecond)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// block waits on channels: the block profile.
func block(stop <-chan struct{}) {
	ch := make(chan int)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				close(ch)
				return
			case <-time.After(time.Millisecond):
				ch <- i
			}
		}
	}()
	for range ch {
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6060", "listen address (port 0 picks one)")
	portFile := flag.String("port-file", "", "write the bound port to this file")
	flag.Parse()

	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(10000)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if *portFile != "" {
		tmp := *portFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d\n", port)), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *portFile); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("demoapp listening on %s", ln.Addr())

	stop := make(chan struct{})
	go burnCPU(stop)
	parkLabelled(stop)
	go allocate(stop)
	go contend(stop)
	go block(stop)
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "demoapp: see /debug/pprof/")
	})
	log.Fatal(http.Serve(ln, nil))
}
